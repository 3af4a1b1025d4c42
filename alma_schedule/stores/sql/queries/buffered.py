"""SQL statements of the store, overlap ``latest``: the routine's one buffered fire
(:mod:`alma_schedule.policies.overlap`).
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/buffered.py).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement

from alma_schedule.model import RunState
from alma_schedule.policies import overlap
from alma_schedule.stores.sql.queries.common import (
    _KEY_COLS,
    Key3,
    Key4,
    Params,
    _unnest,
    end_runs_for_fires,
    lit,
    open_slot,
    owned_states,
)
from alma_schedule.stores.sql.queries.runs import _RUN_KEY, run_params
from alma_schedule.stores.sql.schema import runs

#: The states the expiry sweep closes past ``expires_at``: ``claimed`` and ``buffered`` fires.
EXPIRABLE = (RunState.CLAIMED, RunState.BUFFERED)


def expirable_arms(now: datetime) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """The two arms of :func:`expirable`: claimed, buffered."""
    return (
        sa.and_(runs.c.state == lit(RunState.CLAIMED), runs.c.expires_at <= now),
        sa.and_(runs.c.state == lit(overlap.BUFFER_STATE), runs.c.expires_at <= now),
    )


def expirable(now: datetime) -> ColumnElement[bool]:
    """``claimed`` or ``buffered`` rows whose window has closed: one arm per partial index
    (``ix_runs_expires``, ``uq_runs_one_buffered``), so the planner reads both, never the table."""
    return sa.or_(*expirable_arms(now))


def replace_buffered(dialect: str, fires: Sequence[Key4], now: datetime) -> tuple[Any, Params]:
    """The buffered rows of the routines of these fires -> ``skipped(overlap)`` (a newer fire
    replaces them; a duplicate fire replaces nothing), returned. One statement whatever the number
    of routines (PostgreSQL: ``unnest``)."""
    state, reason = overlap.REPLACED
    return end_runs_for_fires(dialect, "b", fires, state, reason, now, _buffered, _buffered)


def _buffered(c: Any) -> ColumnElement[bool]:
    """A routine's buffered row: the slot of ``uq_runs_one_buffered``, and the CAS of its replacement."""
    buffered: ColumnElement[bool] = c.state == lit(overlap.BUFFER_STATE)
    return buffered


@functools.lru_cache(maxsize=1)
def _lock_open_runs() -> Any:
    k = _unnest("o", _KEY_COLS)
    # one probe of uq_runs_one_active per routine, locking what it finds (LATERAL ... LIMIT 1, see
    # common.end_runs_for_fires): never a hash of every open run of the table
    one = (
        sa.select(runs.c.run_id)
        .where(runs.c.org == k.c.org, runs.c.uid == k.c.uid, runs.c.routine_id == k.c.routine_id)
        .where(open_slot(runs.c))
        .limit(sa.literal_column("1"))  # one by the unique index
        .with_for_update()
        .lateral("o_open")
    )
    return sa.select(one.c.run_id).select_from(k.join(one, sa.true()))


def lock_open_runs(keys: Sequence[Key3]) -> tuple[Any, Params]:
    """PostgreSQL: lock the open (non-terminal) run of each of these routines, through
    ``uq_runs_one_active``: a claim about to buffer fires behind them holds them until it commits,
    so no sweep ends one unseen (the expiry sweep skips locked rows; the transactions that end an
    open run lock its routine row first, which the claim holds)."""
    return _lock_open_runs(), {f"o_{c}": [k[i] for k in keys] for i, c in enumerate(("org", "uid", "routine_id"))}


#: The routine's buffered row, locked (params: ``b_org``, ``b_uid``, ``b_routine_id``).
SELECT_BUFFERED_LOCKED = (
    sa.select(runs)
    .where(
        runs.c.org == sa.bindparam("b_org"),
        runs.c.uid == sa.bindparam("b_uid"),
        runs.c.routine_id == sa.bindparam("b_routine_id"),
        runs.c.state == lit(overlap.BUFFER_STATE),
    )
    .with_for_update()
)


#: The label of :func:`ending_cas`'s extra column: whether the routine has a buffered row.
HAS_BUFFERED = "has_buffered"


@functools.lru_cache(maxsize=512)
def _ending_cas(from_states: tuple[str, ...], columns: tuple[str, ...]) -> Any:
    other = runs.alias("waiting")
    waiting = (
        sa.exists()
        .where(
            other.c.org == runs.c.org,
            other.c.uid == runs.c.uid,
            other.c.routine_id == runs.c.routine_id,
            other.c.state == lit(overlap.BUFFER_STATE),
        )
        .label(HAS_BUFFERED)
    )
    return (
        sa.update(runs)
        .where(_RUN_KEY, *owned_states(*from_states))  # the run by a key index (owned_states)
        .values({c: sa.bindparam(f"v_{c}", type_=runs.c[c].type) for c in columns})
        .returning(*runs.c, waiting)
    )


def ending_cas(key: Any, from_states: Sequence[str], values: Mapping[str, Any]) -> tuple[Any, Params]:
    """The terminal compare-and-set of :func:`~.runs.cas` that also answers, in the same statement,
    whether the routine has a buffered row (column :data:`HAS_BUFFERED`): the release costs a
    round trip only when there is something to release."""
    stmt = _ending_cas(tuple(sorted(from_states)), tuple(sorted(values)))
    return stmt, run_params(key, **{f"v_{c}": v for c, v in values.items()})


def buffered_params(org: str, uid: str, routine_id: str) -> dict[str, str]:
    return {"b_org": org, "b_uid": uid, "b_routine_id": routine_id}
