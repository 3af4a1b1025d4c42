"""SQL statements of the store, reads: the ledger and operator lists."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement

from alma_schedule.model import Reason, RunState
from alma_schedule.stores.sql.queries.common import ACTIVE, dt, in_states, lit
from alma_schedule.stores.sql.queries.tick import ORDER_TAIL
from alma_schedule.stores.sql.schema import runs


def list_runs(
    org: str,
    uid: str,
    *,
    routine_id: str | None,
    state: str | None,
    since: datetime | None,
    limit: int,
    before: tuple[datetime, str] | tuple[datetime, str, str] | None,
) -> sa.Select[Any]:
    """The ledger newest first by ``(fire_at, run_id, routine_id)``; ``before`` pages on the same key
    (all three: two routines of the scope sharing an instant never straddle a page unseen), or on
    its ``(fire_at, run_id)`` pair."""
    stmt = sa.select(runs).where(runs.c.org == org, runs.c.uid == uid)
    if routine_id is not None:
        stmt = stmt.where(runs.c.routine_id == routine_id)
    if state is not None:
        stmt = stmt.where(runs.c.state == state)
    if since is not None:
        stmt = stmt.where(runs.c.fire_at >= since)
    if before is not None:
        key = (runs.c.fire_at, runs.c.run_id, runs.c.routine_id)[: len(before)]
        stmt = stmt.where(sa.tuple_(*key) < sa.tuple_(dt(before[0]), *before[1:]))
    return stmt.order_by(runs.c.fire_at.desc(), runs.c.run_id.desc(), runs.c.routine_id.desc()).limit(limit)


def last_completed_delivery(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    return (
        sa.select(runs)
        .where(
            runs.c.org == org,
            runs.c.uid == uid,
            runs.c.routine_id == routine_id,
            runs.c.state == lit(RunState.COMPLETED),
            runs.c.reason == lit(Reason.DELIVERED),
            runs.c.delivery_hash.is_not(None),
        )
        .order_by(runs.c.fire_at.desc(), runs.c.run_id.desc())
        .limit(1)
    )


def blocked_arms(now: datetime, active_before: datetime) -> tuple[ColumnElement[bool], ...]:
    """The arms of a blocked run (one per way of being blocked; the tick probe's ``blocked`` is an
    ``EXISTS`` per arm, each through ``ix_runs_active_since``)."""
    return (
        sa.and_(runs.c.state == lit(RunState.RUNNING), runs.c.blocked_at.is_not(None)),  # marked at once
        sa.and_(in_states(RunState.RUNNING, RunState.COLLECTING), runs.c.state_at < active_before),
        sa.and_(runs.c.state == lit(RunState.SUBMITTED), runs.c.deadline < now),
    )


def blocked(now: datetime, active_before: datetime, limit: Any) -> sa.Select[Any]:
    return (
        sa.select(runs)
        .where(sa.or_(*blocked_arms(now, active_before)))
        .order_by(runs.c.state_at, *ORDER_TAIL)
        .limit(limit)
    )


def stuck(entered_before: datetime, limit: int) -> sa.Select[Any]:
    return (
        sa.select(runs)
        .where(in_states(*ACTIVE), runs.c.state_at < entered_before)
        .order_by(runs.c.state_at, *ORDER_TAIL)
        .limit(limit)
    )


def unstarted(before: datetime, limit: int) -> sa.Select[Any]:
    """Claimed runs claimed and due before ``before`` (no worker started them), oldest first."""
    due = sa.func.coalesce(runs.c.due_at, runs.c.fire_at)
    return (
        sa.select(runs)
        .where(runs.c.state == lit(RunState.CLAIMED), runs.c.state_at < dt(before), due < dt(before))
        .order_by(runs.c.state_at, *ORDER_TAIL)
        .limit(limit)
    )
