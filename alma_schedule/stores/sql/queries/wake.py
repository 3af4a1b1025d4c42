"""SQL statements of the store, the heartbeat: the tick's one upsert with its wake-up hint, and the
routines that carry a planning error.
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/wake.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.model import BACKFILL_ORIGIN, RunState
from alma_schedule.stores.sql.queries.common import _insert, dt, lit
from alma_schedule.stores.sql.schema import BACKFILL_PENDING_SQL, backfills, heartbeat, routines, runs


def _earliest(column: sa.Column[Any], now: datetime, *where: Any) -> sa.Select[Any]:
    first = sa.select(column).where(column > dt(now), *where).order_by(column).limit(sa.literal_column("1"))
    return sa.select(first.scalar_subquery().label("at"))


#: How many pending backfills (in ``next_at`` order, the claim's own order) the hint looks at.
BACKFILLS_SEEN = 100


def _backfill_ready(now: datetime) -> sa.Select[Any]:
    """The earliest instant after ``now`` at which a pending backfill's next claim became possible
    (:func:`alma_schedule.policies.backfill.ready_at`: the later of the range's ``created_at`` and
    the end of its routine's latest backfill run below ``next_at``), among the first
    :data:`BACKFILLS_SEEN` pending ranges; so a clock that follows the hint ticks when a backfill
    run ends, not at the next re-send."""
    bf = backfills.c
    last_end = (
        sa.select(runs.c.finished_at)
        .where(
            runs.c.org == bf.org,
            runs.c.uid == bf.uid,
            runs.c.routine_id == bf.routine_id,
            runs.c.origin == lit(BACKFILL_ORIGIN),
            runs.c.fire_at >= bf.from_at,
            runs.c.fire_at < bf.next_at,
        )
        .order_by(runs.c.fire_at.desc())
        .limit(sa.literal_column("1"))
        .scalar_subquery()
    )
    pending = (
        sa.select(bf.created_at.label("created"), last_end.label("last_end"))
        .where(sa.text(BACKFILL_PENDING_SQL))
        .order_by(bf.next_at)
        .limit(sa.literal_column(str(BACKFILLS_SEEN)))
        .subquery("pending")
    )
    created, ended = pending.c.created, pending.c.last_end
    ready = sa.case((sa.func.coalesce(ended, created) > created, ended), else_=created)
    return sa.select(sa.func.min(ready).label("at")).where(ready > dt(now))


def wake_hint(now: datetime) -> sa.ScalarSelect[Any]:
    """The wake-up hint at ``now`` as a scalar subquery (NULL: nothing is ever due)."""
    parts = sa.union_all(
        _earliest(routines.c.next_due_at, now),
        _earliest(routines.c.defer_until, now, routines.c.last_error.is_not(None)),
        _earliest(runs.c.resend_at, now, runs.c.state == lit(RunState.CLAIMED)),
        _earliest(runs.c.expires_at, now, runs.c.state == lit(RunState.CLAIMED)),
        _earliest(runs.c.next_poll_at, now, runs.c.state == lit(RunState.SUBMITTED)),
        _backfill_ready(now),
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
