"""SQL statements of the store for the dashboard (issue 17): the tick log (the tick's upsert of its
minute, the prune of minutes older than the log keeps, the overview's read of the newest minutes)
and the capped counts of routines by state; and the end of a tick, :func:`record_tick`: the
heartbeat (with its wake-up hint, :func:`~.wake.record_heartbeat`) and the tick's minute in ONE
statement on PostgreSQL, built once per process (its values named parameters)."""

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


def _oldest(now: datetime) -> datetime:
    """The first minute the log keeps at ``now``."""
    return _minute(now) - timedelta(days=TICK_LOG_KEEP_DAYS)


def upsert_tick_minute(dialect: str, now: datetime, claimed: int, p50: float | None, p95: float | None) -> Any:
    """Insert ``now``'s minute, or merge into it: ticks + 1, claimed added, the larger lags."""
    lag = functools.partial(sa.bindparam, None, type_=sa.Float)
    return _upsert_minute(dialect, dt(_minute(now)), claimed, lag(value=p50), lag(value=p95))


def _prune_oldest(dialect: str, oldest: Any) -> Any:
    """Delete the oldest minutes before ``oldest``, at most ``TICK_LOG_PRUNE_LIMIT``, by primary key:
    on PostgreSQL ``= ANY(ARRAY(...))`` of an ordered ``LIMIT`` scan of the key, the plan a generic
    (prepared) plan keeps whatever the log's size (a bare ``minute < $n`` is estimated at a third of
    the log and may be planned as a sequential scan)."""
    old = sa.select(tick_log.c.minute).where(tick_log.c.minute < oldest).order_by(tick_log.c.minute)
    old = old.limit(TICK_LOG_PRUNE_LIMIT)
    if dialect == "postgresql":
        return sa.delete(tick_log).where(tick_log.c.minute == sa.any_(sa.func.array(old.scalar_subquery())))
    return sa.delete(tick_log).where(tick_log.c.minute.in_(old.scalar_subquery()))


def prune_tick_log(dialect: str, now: datetime) -> Any:
    """Delete the oldest minutes older than the log keeps, at most ``TICK_LOG_PRUNE_LIMIT``."""
    return _prune_oldest(dialect, dt(_oldest(now)))


def log_tick_minute(dialect: str, now: datetime, claimed: int, p50: float | None, p95: float | None) -> list[Any]:
    """The tick's minute: :func:`upsert_tick_minute` and :func:`prune_tick_log`. On PostgreSQL ONE
    statement (the upsert a data-modifying CTE of the prune: the two touch different rows, the new
    minute being 7 days younger than any pruned one); SQLite has no DML in a CTE: both, in order."""
    upsert, prune = upsert_tick_minute(dialect, now, claimed, p50, p95), prune_tick_log(dialect, now)
    if dialect == "postgresql":
        return [prune.add_cte(upsert.cte("minute"))]
    return [upsert, prune]


@functools.cache
def record_tick(dialect: str) -> tuple[Any, ...]:
    """The end of a tick over named parameters (:func:`record_tick_params`), built once per dialect:
    the heartbeat upsert returning the wake-up hint, the upsert of the tick's minute, the prune.
    On PostgreSQL ONE statement: the minute's upsert and the prune are data-modifying CTEs of the
    heartbeat's upsert (three tables' rows that no part reads: ``heartbeat``, the new minute, minutes 7
    days older, at most ``TICK_LOG_PRUNE_LIMIT`` of them); SQLite has no DML in a CTE: the three in order
    (in one transaction). The first statement returns the hint. On PostgreSQL it is a prepared
    statement (:mod:`alma_schedule.stores.sql.hot`): every row it writes is found by key, and each
    part of the hint is a ``min`` over its partial index."""
    now: Any = sa.bindparam("tick_now", type_=UtcDateTime)  # where the builders take an instant
    minute = sa.bindparam("tick_minute", type_=UtcDateTime)
    lag = functools.partial(sa.bindparam, type_=sa.Float)
    upsert = _upsert_minute(
        dialect, minute, sa.bindparam("tick_claimed", type_=sa.Integer),
        sa.cast(lag("tick_lag_p50"), sa.Float), sa.cast(lag("tick_lag_p95"), sa.Float),
    )  # fmt: skip
    prune = _prune_oldest(dialect, sa.bindparam("tick_oldest", type_=UtcDateTime))
    beat = record_heartbeat(dialect, now)
    if dialect == "postgresql":
        return (beat.add_cte(upsert.cte("minute"), prune.cte("pruned")),)
    return beat, upsert, prune


def record_tick_params(now: datetime, claimed: int, p50: float | None, p95: float | None) -> dict[str, Any]:
    """The values of :func:`record_tick`'s parameters."""
    return {
        "tick_now": now, "tick_minute": _minute(now), "tick_claimed": claimed,
        "tick_lag_p50": p50, "tick_lag_p95": p95, "tick_oldest": _oldest(now),
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
