"""Overlap ``latest`` in :class:`~alma_schedule.stores.sql.SqlStore`: the routine's one buffered fire
(:mod:`alma_schedule.policies.overlap`; statements in :mod:`.queries.buffered`).
docs/architecture.md, section "The modules, in detail" (stores/sql/store_buffered.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from alma_schedule.compat.sqlalchemy import row_mapping
from alma_schedule.model import RunKey, RunRecord, RunState
from alma_schedule.policies import overlap
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.driver import Portable
from alma_schedule.stores.sql.rows import run_from_row

Key3 = tuple[str, str, str]


def replacing(
    driver: Portable, dialect: str, fires: list[tuple[str, str, str, str]], now: datetime
) -> list[tuple[Any, Any]]:
    """The statements that make the buffered rows of the routines of these fires
    ``skipped(overlap)`` and return them (one per chunk; a duplicate fire replaces nothing): the
    caller sends them in its transaction and turns their rows into records (``run_from_row``)."""
    return [q.replace_buffered(dialect, chunk, now) for chunk in driver.chunks(fires)]


def end_open_run(
    conn: Any, key: RunKey, from_states: list[str], values: dict[str, Any], now: datetime
) -> tuple[RunRecord | None, RunRecord | None]:
    """The terminal CAS of the routine's open run (None when it moved nothing) and, when the same
    statement saw a buffered row of the routine, its release (see :func:`release_buffered`)."""
    row = conn.execute(*q.ending_cas(key, from_states, values)).first()
    if row is None:
        return None, None
    released = None
    if row_mapping(row)[q.HAS_BUFFERED]:
        released = release_buffered(conn, (key.org, key.uid, key.routine_id), now)
    return run_from_row(row), released


def release_buffered(conn: Any, rk: Key3, now: datetime, *, resend_at: datetime | None = None) -> RunRecord | None:
    """Release the routine's buffered row (the open run just ended at ``now``): ``claimed`` and
    returned (the caller sends it after the commit), or ``skipped(missed)`` past its window
    (None). ``resend_at`` overrides the re-send instant (default: the delay its claim had)."""
    row = conn.execute(q.SELECT_BUFFERED_LOCKED, q.buffered_params(*rk)).first()
    if row is None:
        return None
    rec = run_from_row(row)
    state, reason = overlap.release(rec.expires_at, now)
    values: dict[str, Any] = {"state": state, "reason": reason, "state_at": now}
    if state == RunState.CLAIMED:
        values["resend_at"] = (
            resend_at if resend_at is not None else overlap.released_resend_at(rec.resend_at, rec.claimed_at, now)
        )
    else:
        values["finished_at"] = now
    moved = conn.execute(*q.cas(rec.key, [RunState.BUFFERED], values)).first()
    if moved is None or state != RunState.CLAIMED:
        return None
    return run_from_row(moved)
