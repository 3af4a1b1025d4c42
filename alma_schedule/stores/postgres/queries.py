"""PostgreSQL's forms of the portable statements (:mod:`alma_schedule.stores.sql.queries`), chosen by
:class:`.driver.PostgresDriver` where the benchmark shows they matter: one statement where the portable
store sends several (data-modifying CTEs), arrays bound whole, ``= ANY(ARRAY(...))`` probes
(docs/architecture.md, section "The portable store and PostgreSQL's speed")."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.model.tick import TICK_LOG_PRUNE_LIMIT
from alma_schedule.policies.backfill import FIRE_ORIGINS
from alma_schedule.stores.sql.queries import backfills, ticklog
from alma_schedule.stores.sql.queries.common import _KEY_COLS, Params, _unnest, dt, lit
from alma_schedule.stores.sql.schema import runs, tick_log
from alma_schedule.stores.sql.types import UtcDateTime

__all__ = ["existing_runs", "log_tick_minute", "prune_returning", "record_tick"]

POSTGRESQL = "postgresql"  # SQLAlchemy's name of the dialect


def prune_oldest(oldest: Any) -> Any:
    """:func:`.ticklog.prune_oldest` by ``= ANY(ARRAY(...))`` of an ordered ``LIMIT`` scan of the key:
    the plan a generic (prepared) plan keeps whatever the log's size."""
    old = sa.select(tick_log.c.minute).where(tick_log.c.minute < oldest).order_by(tick_log.c.minute)
    old = old.limit(TICK_LOG_PRUNE_LIMIT)
    return sa.delete(tick_log).where(tick_log.c.minute == sa.any_(sa.func.array(old.scalar_subquery())))


def log_tick_minute(now: datetime, claimed: int, p50: float | None, p95: float | None) -> list[Any]:
    """:func:`.ticklog.log_tick_minute` as ONE statement: the upsert a data-modifying CTE of the prune
    (the two touch different rows, the new minute 7 days younger than any pruned one)."""
    upsert = ticklog.upsert_tick_minute(POSTGRESQL, now, claimed, p50, p95)
    return [prune_oldest(dt(ticklog.oldest(now))).add_cte(upsert.cte("minute"))]


@functools.cache
def record_tick() -> tuple[Any, ...]:
    """:func:`.ticklog.record_tick` as ONE statement (prepared: :mod:`.hot`): the minute's upsert and
    the prune data-modifying CTEs of the heartbeat's upsert; every row it writes found by key."""
    beat, upsert, _ = ticklog.record_tick(POSTGRESQL)
    prune = prune_oldest(sa.bindparam("tick_oldest", type_=UtcDateTime))
    return (beat.add_cte(upsert.cte("minute"), prune.cte("pruned")),)


def prune_returning(before: datetime) -> Any:
    """:func:`.backfills.prune_returning` aggregated in the statement (a CTE over ``DELETE ...
    RETURNING``): per routine, the number deleted and the latest ``fire_at`` of its fire rows."""
    cte = backfills.prune_returning(before).cte("gone")
    fire = sa.func.max(sa.case((cte.c.origin.in_([lit(o) for o in sorted(FIRE_ORIGINS)]), cte.c.fire_at)))
    return sa.select(cte.c.org, cte.c.uid, cte.c.routine_id, sa.func.count(), fire).group_by(
        cte.c.org, cte.c.uid, cte.c.routine_id
    )


def existing_runs(keys: Sequence[tuple[str, str, str, str]]) -> tuple[Any, Params]:
    """:func:`.runs.existing_runs` joined to ``unnest`` of the keys' arrays (one statement whatever the size)."""
    k = _unnest("e", [*_KEY_COLS, ("run_id", sa.Text())])
    pk = (runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
    stmt = sa.select(*pk).join(
        k,
        sa.and_(
            runs.c.org == k.c.org,
            runs.c.uid == k.c.uid,
            runs.c.routine_id == k.c.routine_id,
            runs.c.run_id == k.c.run_id,
        ),
    )
    return stmt, {f"e_{c}": [key[i] for key in keys] for i, c in enumerate(("org", "uid", "routine_id", "run_id"))}
