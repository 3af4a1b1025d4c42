"""The end of a run of a fixed-delay routine sets its next fire, in the transaction that writes
the end (:func:`alma_schedule.policies.fixed_delay.rearmed_due`, written once for both stores).
docs/architecture.md, section "The modules, in detail" (stores/sql/store_fixed_delay.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from alma_schedule.policies.fixed_delay import rearmed_due
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import routine_from_row

__all__ = ["is_fixed_delay", "rearm"]


def is_fixed_delay(row: Any) -> bool:
    """Whether a ``routines`` row (as read) has an ``after`` schedule: the cheap test before :func:`rearm`."""
    schedule = getattr(row, "schedule", None) if row is not None else None
    return isinstance(schedule, Mapping) and "after" in schedule


def rearm(conn: Any, rk: tuple[str, str, str], ended_at: datetime) -> datetime | None:
    """In the caller's transaction, after a run of the routine ``rk`` ended at ``ended_at``: read the
    routine row locked (the store's lock order: the caller locked it first) and write its next fire
    when :func:`rearmed_due` gives one. Returns what it wrote (None: nothing)."""
    row = conn.execute(q.select_routine(*rk, lock=True)).first()
    if row is None or not is_fixed_delay(row):
        return None
    due = rearmed_due(routine_from_row(row), ended_at)
    if due is not None:
        conn.execute(q.update_routine(*rk, {"next_due_at": due, "updated_at": ended_at}, live_only=True))
    return due
