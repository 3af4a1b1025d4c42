"""Stores: the :class:`Store` protocol and its backends, opened by URL with :func:`open_store`.
docs/architecture.md, section "The modules, in detail" (stores/__init__.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alma_schedule.stores.base import Store

if TYPE_CHECKING:
    from alma_schedule.stores.sql import SqlStore, migrate_store

__all__ = ["SqlStore", "Store", "migrate_store", "open_store"]


def open_store(url: str, *, schema: str | None = None, connections: int | None = None) -> Store:
    """The store named by ``url``, in the namespace ``schema`` (None: ``alma``; the memory store
    has none). ``connections``: the SQL pool's steady size (None: 2; a worker whose tasks run in
    threads asks for its concurrency, so they never wait on each other for a connection), plus 2
    overflow. See the module docstring."""
    if url.strip().lower().startswith("memory:"):
        from alma_schedule.stores.memory import MemoryStore

        return MemoryStore()
    from alma_schedule.stores.sql import SqlStore

    if connections is None:
        return SqlStore(url, schema=schema)
    return SqlStore(url, schema=schema, pool_size=max(2, connections))


def __getattr__(name: str) -> Any:
    if name in ("SqlStore", "migrate_store"):
        from alma_schedule.stores import sql

        return getattr(sql, name)
    raise AttributeError(f"module 'alma_schedule.stores' has no attribute {name!r}")
