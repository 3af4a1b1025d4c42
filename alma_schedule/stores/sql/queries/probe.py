"""SQL statements of the store, the tick probe: ONE read saying, per step of the tick, whether it has
anything to do.
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/probe.py).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.model import RunState
from alma_schedule.stores.sql.queries.buffered import expirable_arms
from alma_schedule.stores.sql.queries.maintenance import erasable, purgeable
from alma_schedule.stores.sql.queries.reads import blocked, blocked_arms
from alma_schedule.stores.sql.queries.tick import due_routine, takeable
from alma_schedule.stores.sql.queries.wake import erroring, erroring_routine
from alma_schedule.stores.sql.schema import BACKFILL_PENDING_SQL, backfills, routines, runs
from alma_schedule.stores.sql.types import UtcDateTime

#: The probe's columns, in order: the fields of :class:`~alma_schedule.model.TickProbe`.
FLAGS = ("due", "backfills", "resends", "expiries", "polls", "expired_results", "purge", "blocked", "erroring")


def _any(table: sa.Table, where: Any, *order: Any) -> Any:
    """Whether a row of ``table`` satisfies ``where``: its first one in ``order`` (an index's order)."""
    one: Any = sa.literal_column("1")  # a literal LIMIT: a generic plan that knows it reads one row
    first: sa.Select[Any] = sa.select(one).select_from(table).where(where).order_by(*order).limit(one)
    return first.scalar_subquery().is_not(None)


def tick_probe(now: Any, active_before: Any) -> sa.Select[Any]:
    """One row of booleans, :data:`FLAGS` (``active_before``: ``now - 2 * run_time_limit``, as
    ``blocked``); the instants are values or named parameters."""
    claimed_late, buffered_late = expirable_arms(now)
    key = (runs.c.org, runs.c.uid, runs.c.routine_id)
    parts = {
        "due": _any(routines, due_routine(now), routines.c.next_due_at),
        "backfills": _any(backfills, sa.text(BACKFILL_PENDING_SQL), backfills.c.next_at),
        "resends": _any(runs, takeable(runs.c.resend_at, RunState.CLAIMED, now, live=True), runs.c.resend_at),
        "expiries": sa.or_(_any(runs, claimed_late, runs.c.expires_at), _any(runs, buffered_late, *key)),
        "polls": _any(runs, takeable(runs.c.next_poll_at, RunState.SUBMITTED, now), runs.c.next_poll_at),
        "expired_results": _any(runs, erasable(now), runs.c.erase_at),
        "purge": _any(routines, purgeable(), routines.c.deleted_at),
        "blocked": sa.or_(*(_any(runs, arm, runs.c.state_at) for arm in blocked_arms(now, active_before))),
        "erroring": _any(routines, erroring_routine(), routines.c.defer_until),
    }
    return sa.select(*(parts[name].label(name) for name in FLAGS))


@functools.cache
def tick_probe_statement() -> sa.Select[Any]:
    """:func:`tick_probe` over the named parameters ``probe_now`` and ``probe_active_before``, built
    once (SQLAlchemy then also reuses its cache key and compiled form)."""
    now = sa.bindparam("probe_now", type_=UtcDateTime)
    return tick_probe(now, sa.bindparam("probe_active_before", type_=UtcDateTime))


def tick_probe_params(now: datetime, active_before: datetime) -> dict[str, datetime]:
    """The values of :func:`tick_probe_statement`'s parameters."""
    return {"probe_now": now, "probe_active_before": active_before}


@functools.lru_cache(maxsize=8)
def blocked_statement(limit: int) -> sa.Select[Any]:
    """:func:`~.reads.blocked` (the tick's report of blocked runs) over the named parameters of
    :func:`tick_probe_params`, built once per ``limit`` (a literal: prepared, its generic plan knows
    it). Every arm holds only open runs, so any plan of it reads the open runs' partial indexes
    (``ix_runs_active_since``, ``ix_runs_poll``), never the ledger: the store prepares it
    (``tests/stores/test_sql_blocked_read.py`` EXPLAINs its plans over a burst)."""
    now: Any = sa.bindparam("probe_now", type_=UtcDateTime)  # where the builder takes an instant
    active_before: Any = sa.bindparam("probe_active_before", type_=UtcDateTime)
    return blocked(now, active_before, sa.literal_column(str(int(limit))))


@functools.lru_cache(maxsize=8)
def erroring_statement(limit: int) -> sa.Select[Any]:
    """:func:`~.wake.erroring` built once per ``limit`` (a literal: it has no parameter, so the end of
    a tick can send it rendered, :mod:`.store_ticklog`)."""
    return erroring(sa.literal_column(str(int(limit))))
