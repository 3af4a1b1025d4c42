"""SQL statements of the store, the audit trail (``routine_events``): the append, a routine's
history, the erasure of a scope's payloads and the retention's bounded prune.
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/events.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.policies.audit import Entry
from alma_schedule.stores.sql.schema import routine_events

__all__ = ["append_event", "erase_events", "prune_events", "select_events"]

E = routine_events.c


def append_event(key: tuple[str, str, str], entry: Entry) -> Any:
    """One row, appended (the id is the database's)."""
    return sa.insert(routine_events).values(
        org=key[0],
        uid=key[1],
        routine_id=key[2],
        at=entry.at,
        actor=entry.actor,
        action=entry.action,
        reason=entry.reason,
        diff=entry.diff,
    )


def select_events(org: str, uid: str, routine_id: str, limit: int) -> sa.Select[Any]:
    """A routine's events, newest first (``ix_routine_events_routine``)."""
    return (
        sa.select(E.org, E.uid, E.routine_id, E.event_id, E.at, E.actor, E.action, E.reason, E.diff)
        .where(E.org == org, E.uid == uid, E.routine_id == routine_id)
        .order_by(E.at.desc(), E.event_id.desc())
        .limit(limit)
    )


def erase_events(org: str, uid: str) -> Any:
    """Blank the payloads (reason and diff) of a scope's events; who and when stay."""
    stmt = sa.update(routine_events).where(E.org == org, E.uid == uid)
    return stmt.where(sa.or_(E.reason.is_not(None), E.diff.is_not(None))).values(reason=None, diff=sa.null())


def prune_events(before: datetime, limit: int) -> Any:
    """Delete up to ``limit`` events older than ``before``, oldest first (``ix_routine_events_at``)."""
    oldest = sa.select(E.event_id).where(E.at < before).order_by(E.at, E.event_id).limit(limit)
    return sa.delete(routine_events).where(E.event_id.in_(oldest.scalar_subquery()))
