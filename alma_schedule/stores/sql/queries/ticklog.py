"""SQL statements of the store for the dashboard: the tick log (the tick's upsert of its
minute, the prune of minutes older than the log keeps, the overview's read of the newest minutes)
and the capped counts of routines by state; and the end of a tick, :func:`record_tick`: the
heartbeat (with its wake-up hint, :func:`~.wake.record_heartbeat`) and the tick's minute in ONE
statement on PostgreSQL (:mod:`alma_schedule.stores.postgres.queries`), built once per process."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from alma_schedule.model.tick import TICK_LOG_KEEP_DAYS, TICK_LOG_PRUNE_LIMIT
from alma_schedule.stores.sql.queries.common import _insert, dt
from alma_schedule.stores.sql.queries.wake import record_heartbeat
from alma_schedule.stores.sql.schema import tick_log
from alma_schedule.stores.sql.types import UtcDateTime


def _larger(stored: sa.Column[Any], given: Any) -> Any:
    """The larger of the stored and the given lag, NULL counting as nothing."""
    return sa.case(
        (stored.is_(None), given),
        (given.is_(None), stored),
        (given > stored, given),
        else_=stored,
    )


def _upsert_minute(dialect: str, minute: Any, claimed: Any, p50: Any, p95: Any) -> Any:
    ins = _insert(dialect, tick_log).values(minute=minute, ticks=1, claimed=claimed, lag_p50=p50, lag_p95=p95)
    return ins.on_conflict_do_update(
        index_elements=[tick_log.c.minute],
        set_={
            "ticks": tick_log.c.ticks + 1,
            "claimed": tick_log.c.claimed + ins.excluded.claimed,
            "lag_p50": _larger(tick_log.c.lag_p50, ins.excluded.lag_p50),
            "lag_p95": _larger(tick_log.c.lag_p95, ins.excluded.lag_p95),
        },
    )


def _minute(now: datetime) -> datetime:
    return now.replace(second=0, microsecond=0)


def oldest(now: datetime) -> datetime:
    """The first minute the log keeps at ``now``."""
    return _minute(now) - timedelta(days=TICK_LOG_KEEP_DAYS)


def upsert_tick_minute(dialect: str, now: datetime, claimed: int, p50: float | None, p95: float | None) -> Any:
    """Insert ``now``'s minute, or merge into it: ticks + 1, claimed added, the larger lags."""
    lag = functools.partial(sa.bindparam, None, type_=sa.Float)
    return _upsert_minute(dialect, dt(_minute(now)), claimed, lag(value=p50), lag(value=p95))


def prune_oldest(before: Any) -> Any:
    """Delete the oldest minutes before ``before``, at most ``TICK_LOG_PRUNE_LIMIT``, by primary key
    (PostgreSQL's form: :func:`alma_schedule.stores.postgres.queries.prune_oldest`)."""
    old = sa.select(tick_log.c.minute).where(tick_log.c.minute < before).order_by(tick_log.c.minute)
    old = old.limit(TICK_LOG_PRUNE_LIMIT)
    return sa.delete(tick_log).where(tick_log.c.minute.in_(old.scalar_subquery()))


def prune_tick_log(now: datetime) -> Any:
    """Delete the oldest minutes older than the log keeps, at most ``TICK_LOG_PRUNE_LIMIT``."""
    return prune_oldest(dt(oldest(now)))


def log_tick_minute(dialect: str, now: datetime, claimed: int, p50: float | None, p95: float | None) -> list[Any]:
    """The tick's minute: :func:`upsert_tick_minute` and :func:`prune_tick_log`, in order (PostgreSQL's
    one statement: :func:`alma_schedule.stores.postgres.queries.log_tick_minute`)."""
    return [upsert_tick_minute(dialect, now, claimed, p50, p95), prune_tick_log(now)]


@functools.cache
def record_tick(dialect: str) -> tuple[Any, ...]:
    """The end of a tick over named parameters (:func:`record_tick_params`), built once per dialect:
    the heartbeat upsert returning the wake-up hint, the upsert of the tick's minute, the prune, run
    in order in one transaction (PostgreSQL's one statement:
    :func:`alma_schedule.stores.postgres.queries.record_tick`)."""
    now: Any = sa.bindparam("tick_now", type_=UtcDateTime)  # where the builders take an instant
    minute = sa.bindparam("tick_minute", type_=UtcDateTime)
    lag = functools.partial(sa.bindparam, type_=sa.Float)
    upsert = _upsert_minute(
        dialect, minute, sa.bindparam("tick_claimed", type_=sa.Integer),
        sa.cast(lag("tick_lag_p50"), sa.Float), sa.cast(lag("tick_lag_p95"), sa.Float),
    )  # fmt: skip
    prune = prune_oldest(sa.bindparam("tick_oldest", type_=UtcDateTime))
    return record_heartbeat(dialect, now), upsert, prune


def record_tick_params(now: datetime, claimed: int, p50: float | None, p95: float | None) -> dict[str, Any]:
    """The values of :func:`record_tick`'s parameters."""
    return {
        "tick_now": now, "tick_minute": _minute(now), "tick_claimed": claimed,
        "tick_lag_p50": p50, "tick_lag_p95": p95, "tick_oldest": oldest(now),
    }  # fmt: skip


def select_tick_log(limit: int) -> sa.Select[Any]:
    """The ``limit`` newest minutes, newest first (a backward scan of the primary key)."""
    return (
        sa.select(tick_log.c.minute, tick_log.c.ticks, tick_log.c.claimed, tick_log.c.lag_p50, tick_log.c.lag_p95)
        .order_by(tick_log.c.minute.desc())
        .limit(limit)
    )


def count_routines(cap: int) -> sa.Select[Any]:
    """Live routines by state, each counted over at most ``cap + 1`` rows (one statement)."""
    from alma_schedule.stores.sql.schema import routines

    # the predicate of ix_routines_inactive, as the same literal: paused and disabled are read through
    # that partial index (rare rows); enabled stops after cap + 1 rows of any scan
    inactive = sa.text("deleted_at IS NULL AND (enabled = false OR paused_reason IS NOT NULL)")
    states = {
        "enabled": sa.and_(
            routines.c.deleted_at.is_(None), sa.text("enabled = true"), routines.c.paused_reason.is_(None)
        ),
        "paused": sa.and_(inactive, sa.text("enabled = true"), routines.c.paused_reason.is_not(None)),
        "disabled": sa.and_(inactive, sa.text("enabled = false")),
    }

    def capped(name: str, where: Any) -> Any:
        rows = sa.select(sa.literal(1).label("one")).select_from(routines).where(where).limit(cap + 1)
        return sa.select(sa.func.count()).select_from(rows.subquery(name)).scalar_subquery().label(name)

    return sa.select(*(capped(name, where) for name, where in states.items()))
