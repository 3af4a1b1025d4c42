"""The in-memory reference store (:class:`MemoryStore`): every method of the protocol, one lock."""

from __future__ import annotations

from alma_schedule.stores.memory.store import MemoryStore

__all__ = ["MemoryStore"]
