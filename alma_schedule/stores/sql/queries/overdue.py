"""SQL statements of the "did not run" alarm: the routines with ``expect`` (the partial index
``ix_routines_expect``), their latest runs (one index-ordered branch per routine, ``ix_runs_routine_fire``),
and the alerts' delivery rows (``overdue_alerts``).

docs/architecture.md, section "The modules, in detail" (stores/sql/queries/overdue.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.stores.sql.queries.common import _insert, dt
from alma_schedule.stores.sql.schema import EXPECT_SQL, overdue_alerts, routines, runs

__all__ = [
    "alert_delivered",
    "alert_retry",
    "alert_rows",
    "expect_routines",
    "insert_alert",
    "recent_runs",
    "take_alert",
]

RKey = tuple[str, str, str]
FKey = tuple[str, str, str, datetime]


def expect_routines(dialect: str, after: RKey | None, limit: int) -> sa.Select[Any]:
    """Live routines whose schedule has ``expect``, in key order (the partial index; the caller
    leaves out the paused and disabled ones)."""
    stmt = sa.select(routines).where(sa.text(EXPECT_SQL[dialect]))
    if after is not None:
        stmt = stmt.where(sa.tuple_(routines.c.org, routines.c.uid, routines.c.routine_id) > sa.tuple_(*after))
    return stmt.order_by(routines.c.org, routines.c.uid, routines.c.routine_id).limit(limit)


def recent_runs(keys: Sequence[RKey], per_routine: int) -> sa.CompoundSelect[Any] | sa.Select[Any]:
    """The latest ``per_routine`` runs of each routine (newest ``fire_at`` first): ONE statement, a
    ``UNION ALL`` of one bounded, index-ordered branch per routine."""
    branches = [
        sa.select(
            sa.select(runs)
            .where(runs.c.org == org, runs.c.uid == uid, runs.c.routine_id == rid)
            .order_by(runs.c.fire_at.desc(), runs.c.run_id.desc())
            .limit(per_routine)
            .subquery()
        )
        for org, uid, rid in keys
    ]
    if len(branches) == 1:
        return branches[0]
    return sa.union_all(*branches)


def _fkey(key: FKey) -> sa.ColumnElement[bool]:
    org, uid, rid, fire_at = key
    return sa.and_(
        overdue_alerts.c.org == org,
        overdue_alerts.c.uid == uid,
        overdue_alerts.c.routine_id == rid,
        overdue_alerts.c.fire_at == dt(fire_at),
    )


def alert_rows(keys: Sequence[FKey]) -> sa.Select[Any]:
    """The delivery rows of these fires (primary-key lookups)."""
    return sa.select(overdue_alerts).where(sa.or_(*(_fkey(k) for k in keys)))


def insert_alert(dialect: str, key: FKey, now: datetime, lease_until: datetime) -> Any:
    """A fire's first send: its row with one attempt, unless it exists (``ON CONFLICT DO NOTHING``)."""
    org, uid, rid, fire_at = key
    values = {
        "org": org,
        "uid": uid,
        "routine_id": rid,
        "fire_at": fire_at,
        "attempts": 1,
        "next_attempt_at": lease_until,
        "created_at": now,
    }
    return _insert(dialect, overdue_alerts).values(values).on_conflict_do_nothing().returning(overdue_alerts.c.org)


def take_alert(key: FKey, now: datetime, lease_until: datetime) -> Any:
    """The CAS of a re-send: an undelivered row whose lease ended gets one more attempt and a new lease."""
    return (
        sa.update(overdue_alerts)
        .where(_fkey(key), overdue_alerts.c.delivered_at.is_(None), overdue_alerts.c.next_attempt_at <= dt(now))
        .values(attempts=overdue_alerts.c.attempts + 1, next_attempt_at=dt(lease_until))
        .returning(overdue_alerts.c.org)
    )


def alert_retry(key: FKey, lease_until: datetime) -> Any:
    """The task's own retry: one more attempt, the lease pushed past its countdown (undelivered rows only)."""
    return (
        sa.update(overdue_alerts)
        .where(_fkey(key), overdue_alerts.c.delivered_at.is_(None))
        .values(attempts=overdue_alerts.c.attempts + 1, next_attempt_at=dt(lease_until))
        .returning(overdue_alerts.c.org)
    )


def alert_delivered(key: FKey, now: datetime) -> Any:
    """The 2xx: ``delivered_at`` written once (the first wins)."""
    return (
        sa.update(overdue_alerts)
        .where(_fkey(key), overdue_alerts.c.delivered_at.is_(None))
        .values(delivered_at=dt(now))
        .returning(overdue_alerts.c.org)
    )
