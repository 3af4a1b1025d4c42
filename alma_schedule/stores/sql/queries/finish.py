"""SQL statements of the store, the one-statement finish (PostgreSQL): the terminal CAS, the money
settlement and the failure streak in ONE data-modifying statement (one round trip, autocommit).
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/finish.py).
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from alma_schedule.model import RunState
from alma_schedule.policies.streak import StreakEffect
from alma_schedule.stores.sql.queries.common import lit, owned_states
from alma_schedule.stores.sql.queries.runs import _RUN_KEY
from alma_schedule.stores.sql.schema import routines, runs, spend
from alma_schedule.stores.sql.types import UtcDateTime

_NOW = sa.bindparam("now", type_=UtcDateTime)
_EMPTY = sa.literal_column("'[]'::jsonb", type_=JSONB)


def _routine_key(table: Any) -> Any:
    return sa.and_(
        table.c.org == sa.bindparam("k_org"),
        table.c.uid == sa.bindparam("k_uid"),
        table.c.routine_id == sa.bindparam("k_routine_id"),
    )


@functools.lru_cache(maxsize=64)
def finish_statement(from_states: tuple[str, ...], effect: str) -> Any:
    """The statement for one (owned states, streak effect) shape, built once. Params: the run key
    (``k_*``), ``now``, ``f_state``, ``f_reason``, ``f_cost`` (None: the recorded cost),
    ``f_error_class``, ``f_erase_at``, ``f_threshold``, ``f_latch``."""
    buffered = runs.alias("waiting")
    guards = [
        _RUN_KEY,
        *owned_states(*from_states),  # the run by a key index, whatever the statistics (owned_states)
        ~sa.exists().where(_routine_key(buffered), buffered.c.state == lit(RunState.BUFFERED)),
    ]
    # The routine row, locked first (the store's lock order), whatever the streak effect, and only
    # while it cannot hold a buffered fire: a claim that buffers the next fire holds this lock until
    # it commits, and this statement's snapshot, taken before the wait, could not see that fire. A
    # ``latest`` routine (re-checked on the row's latest version after a wait) takes the
    # transaction instead, whose statements after its lock see the fire and release it.
    can_buffer = sa.func.coalesce(routines.c.schedule.op("->>")(lit("overlap")), lit("skip")) == lit("latest")
    # A fixed-delay routine (``after``) takes the transaction too: the end of its run sets its next fire.
    fixed_delay = routines.c.schedule.op("->>")(lit("after")).is_not(None)
    # A failure that latches the streak's automatic pause takes the transaction too: it appends the
    # pause's audit event (policies/audit.py::auto_paused) there, in the same transaction.
    unless = [~_latches()] if effect == StreakEffect.COUNT else []
    rl = (
        sa.select(routines.c.org)
        .where(_routine_key(routines), ~can_buffer, ~fixed_delay, *unless)
        .with_for_update()
        .cte("rl")
    )
    guards.append(sa.exists().select_from(rl))
    old = sa.select(runs).where(*guards).with_for_update(of=runs).cte("old")
    held = sa.and_(old.c.reserve_day.is_not(None), old.c.reserve_ceilings != _EMPTY)
    cost = sa.func.coalesce(sa.bindparam("f_cost", type_=sa.BigInteger), old.c.cost_micros)
    kept = sa.and_(old.c.result_text.is_not(None), old.c.erase_at.is_(None))
    fin = (
        sa.update(runs)
        .where(
            runs.c.org == old.c.org,
            runs.c.uid == old.c.uid,
            runs.c.routine_id == old.c.routine_id,
            runs.c.run_id == old.c.run_id,
            *owned_states(*from_states),  # true of the row old locked: the same key index
        )
        .values(
            state=sa.bindparam("f_state", type_=sa.String),
            reason=sa.bindparam("f_reason", type_=sa.String),
            state_at=_NOW,
            finished_at=_NOW,
            cost_micros=cost,
            error_class=sa.bindparam("f_error_class", type_=sa.String),
            erase_at=sa.case((kept, sa.bindparam("f_erase_at", type_=UtcDateTime)), else_=old.c.erase_at),
            reserved_micros=sa.case((held, 0), else_=old.c.reserved_micros),
            reserve_ceilings=sa.case((held, _EMPTY), else_=old.c.reserve_ceilings),
        )
        .returning(*runs.c)
        .cte("fin")
    )
    ceilings = sa.select(sa.func.jsonb_array_elements_text(old.c.reserve_ceilings)).scalar_subquery()
    sl = (
        sa.select(spend.c.ceiling_key, spend.c.day)
        .where(held, spend.c.day == old.c.reserve_day, spend.c.ceiling_key.in_(ceilings))
        .order_by(spend.c.ceiling_key)
        .with_for_update(of=spend)
        .cte("sl")
    )
    left = spend.c.reserved_micros - old.c.reserved_micros
    su = (
        sa.update(spend)
        .where(
            spend.c.ceiling_key == sl.c.ceiling_key,
            spend.c.day == sl.c.day,
            sl.c.day == old.c.reserve_day,
            fin.c.run_id == old.c.run_id,
        )
        .values(
            reserved_micros=sa.case((left < 0, 0), else_=left),
            settled_micros=spend.c.settled_micros + fin.c.cost_micros,
        )
        .cte("su")
    )
    main = sa.select(fin)
    ctes: list[Any] = [su]
    if effect != StreakEffect.NONE:
        ctes.append(_streak(effect, fin).cte("st"))
    return main.add_cte(*ctes)


def _latches() -> Any:
    """Whether one more failure latches the routine's automatic pause (as :func:`_streak` writes it)."""
    threshold = sa.bindparam("f_threshold", type_=sa.Integer)
    return sa.and_(threshold > 0, routines.c.consecutive_failures + 1 >= threshold, routines.c.paused_reason.is_(None))


def _streak(effect: str, fin: Any) -> Any:
    at_routine = sa.and_(
        routines.c.org == fin.c.org, routines.c.uid == fin.c.uid, routines.c.routine_id == fin.c.routine_id
    )
    if effect == StreakEffect.RESET:
        return (
            sa.update(routines)
            .where(at_routine, routines.c.consecutive_failures != 0)
            .values(consecutive_failures=0, updated_at=_NOW)
        )
    threshold = sa.bindparam("f_threshold", type_=sa.Integer)
    latch = sa.and_(threshold > 0, routines.c.consecutive_failures + 1 >= threshold, routines.c.paused_reason.is_(None))
    return (
        sa.update(routines)
        .where(at_routine)
        .values(
            consecutive_failures=routines.c.consecutive_failures + 1,
            updated_at=_NOW,
            paused_reason=sa.case((latch, sa.bindparam("f_latch", type_=sa.String)), else_=routines.c.paused_reason),
            next_due_at=sa.case((latch, sa.null()), else_=routines.c.next_due_at),
        )
    )
