"""SQL statements of the store, the heartbeat: the tick's one upsert with its wake-up hint, and the
routines that carry a planning error.

The hint is the earliest instant strictly after the tick's ``now`` at which a tick has something to
do: a routine's ``next_due_at`` (also of a routine whose planning back-off ends then:
``defer_until``), a claimed run's ``resend_at`` or ``expires_at``, a submitted run's
``next_poll_at``. Each part is the first value of an ordered ``LIMIT 1`` scan of its own partial
index (``ix_routines_due``, ``ix_routines_erroring``, ``ix_runs_resend``, ``ix_runs_expires``,
``ix_runs_poll``), so the hint costs a few index probes inside the heartbeat's statement and no
round trip of its own. Not ``min()``: PostgreSQL plans a ``min`` twice (the aggregate, and its rewrite
as such a scan), and the heartbeat's statement is re-planned whenever a ``VACUUM`` or ``ANALYZE`` of
``runs`` invalidates its cached plan; measured on a 2-core machine, planning it took 1.3-2.0 ms with
``min`` and 0.42-0.47 ms with these scans (the same plan shape; the value is the same: NULL when no
row qualifies, a NULL column never qualifies).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.model import RunState
from alma_schedule.stores.sql.queries.common import _insert, dt, lit
from alma_schedule.stores.sql.schema import heartbeat, routines, runs


def _earliest(column: sa.Column[Any], now: datetime, *where: Any) -> sa.Select[Any]:
    first = sa.select(column).where(column > dt(now), *where).order_by(column).limit(sa.literal_column("1"))
    return sa.select(first.scalar_subquery().label("at"))


def wake_hint(now: datetime) -> sa.ScalarSelect[Any]:
    """The wake-up hint at ``now`` as a scalar subquery (NULL: nothing is ever due)."""
    parts = sa.union_all(
        _earliest(routines.c.next_due_at, now),
        _earliest(routines.c.defer_until, now, routines.c.last_error.is_not(None)),
        _earliest(runs.c.resend_at, now, runs.c.state == lit(RunState.CLAIMED)),
        _earliest(runs.c.expires_at, now, runs.c.state == lit(RunState.CLAIMED)),
        _earliest(runs.c.next_poll_at, now, runs.c.state == lit(RunState.SUBMITTED)),
    ).subquery("wake")
    return sa.select(sa.func.min(parts.c.at)).scalar_subquery()


def record_heartbeat(dialect: str, now: datetime) -> Any:
    """Upsert the one heartbeat row with the wake-up hint at ``now``, returning the hint.

    ``last_tick`` never moves backwards; the hint is always the one just computed (a tick older
    than the heartbeat, from a skewed clock, can only make it earlier, which wakes a clock early:
    harmless)."""
    ins = _insert(dialect, heartbeat).values(id=1, last_tick=dt(now), next_wake_at=wake_hint(now))
    newer = sa.case(
        (heartbeat.c.last_tick < ins.excluded.last_tick, ins.excluded.last_tick), else_=heartbeat.c.last_tick
    )
    return ins.on_conflict_do_update(
        index_elements=[heartbeat.c.id],
        set_={"last_tick": newer, "next_wake_at": ins.excluded.next_wake_at},
    ).returning(heartbeat.c.next_wake_at)


def select_wake_hint(now: datetime) -> sa.Select[Any]:
    """The hint at ``now`` without writing (``plan``)."""
    return sa.select(wake_hint(now))


def select_next_wake() -> sa.Select[Any]:
    """The hint the last tick stored."""
    return sa.select(heartbeat.c.next_wake_at).where(heartbeat.c.id == 1)


def erroring_routine() -> Any:
    """A live routine that carries a planning error (also the tick probe's ``erroring``)."""
    return sa.and_(routines.c.last_error.is_not(None), routines.c.deleted_at.is_(None))


def erroring(limit: int | Any) -> sa.Select[Any]:
    """Up to ``limit`` live routines that carry a planning error, by next attempt, each row with the
    count of all of them (``count(*) OVER ()`` is taken before the LIMIT); ``limit`` a value or an
    expression (a literal: :func:`~.probe.erroring_statement`)."""
    return (
        sa.select(
            routines.c.org,
            routines.c.uid,
            routines.c.routine_id,
            routines.c.defer_until,
            routines.c.last_error,
            sa.func.count().over().label("erroring"),
        )
        .where(erroring_routine())
        .order_by(routines.c.defer_until, routines.c.org, routines.c.uid, routines.c.routine_id)
        .limit(limit)
    )
