"""One row of a routine's audit trail (``routine_events``): who changed it, when, how, and what it
was before and after. Append-only: a row is never updated, except that an erasure blanks its payload.
docs/architecture.md, section "The modules, in detail" (model/events.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alma_schedule.model.data import Data

__all__ = ["ACTIONS", "RoutineEvent"]

#: The writes that leave an event (the tick's own claims and cursor moves never do: the ledger has them).
ACTIONS = (
    "register",
    "update",
    "sync",
    "pause",
    "resume",
    "enable",
    "disable",
    "delete",
    "trigger",
    "backfill",
    "cancel_backfill",
    "record",
)


@dataclass(frozen=True, slots=True)
class RoutineEvent(Data):
    """One audit row. ``diff`` maps a changed field (``schedule``, ``definition``, ``kind``,
    ``enabled``, ``paused_reason``, ``disabled_reason``, ``deleted_at``) to ``{"before", "after"}``;
    ``reason`` and ``diff`` are None once the scope's payloads were erased."""

    org: str
    uid: str
    routine_id: str
    event_id: int
    at: datetime
    actor: str | None
    action: str
    reason: str | None
    diff: Mapping[str, Any] | None
