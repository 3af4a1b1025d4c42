"""SQL statements of the store, backfills: the range rows, the tick's backfill claim, the prune that
raises ``pruned_through``, and the system-wide routine listing (``routines list --all``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.model import BACKFILL_ORIGIN, Reason, RunState
from alma_schedule.stores.sql.queries.common import (
    TERMINAL,
    Params,
    _insert,
    dt,
    in_states,
    lit,
    open_run_of_routine,
)
from alma_schedule.stores.sql.queries.tick import _batch_update_routines
from alma_schedule.stores.sql.schema import BACKFILL_PENDING_SQL, backfills, routines, runs
from alma_schedule.stores.sql.types import UtcDateTime

_BF_KEY = (backfills.c.org, backfills.c.uid, backfills.c.routine_id)
_RT_KEY = (routines.c.org, routines.c.uid, routines.c.routine_id)


def _bf_pk(org: str, uid: str, routine_id: str) -> Any:
    return sa.and_(backfills.c.org == org, backfills.c.uid == uid, backfills.c.routine_id == routine_id)


def select_backfill(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    return sa.select(backfills).where(_bf_pk(org, uid, routine_id))


def put_backfill(dialect: str, values: Mapping[str, Any]) -> Any:
    """Insert the routine's backfill row, or replace the done/cancelled one (the caller checked)."""
    ins = _insert(dialect, backfills).values(dict(values))
    rest = {c.name: ins.excluded[c.name] for c in backfills.c if not c.primary_key}
    return ins.on_conflict_do_update(index_elements=list(_BF_KEY), set_=rest).returning(*backfills.c)


def cancel_backfill(org: str, uid: str, routine_id: str, now: datetime) -> Any:
    return (
        sa.update(backfills)
        .where(_bf_pk(org, uid, routine_id), backfills.c.cancelled_at.is_(None))
        .values(cancelled_at=dt(now))
        .returning(*backfills.c)
    )


def skip_claimed_backfill_run(org: str, uid: str, routine_id: str, now: datetime) -> Any:
    """The routine's ``claimed`` backfill run -> ``skipped(operator)`` (CAS, returned)."""
    return (
        sa.update(runs)
        .where(
            runs.c.org == org,
            runs.c.uid == uid,
            runs.c.routine_id == routine_id,
            runs.c.state == lit(RunState.CLAIMED),
            runs.c.origin == lit(BACKFILL_ORIGIN),
        )
        .values(state=lit(RunState.SKIPPED), reason=lit(Reason.OPERATOR), state_at=dt(now), finished_at=dt(now))
        .returning(*runs.c)
    )


def any_pending_backfill() -> sa.Select[Any]:
    """Whether any backfill is pending: the tick's one read when none is (``ix_backfills_pending``)."""
    return sa.select(backfills.c.org).where(sa.text(BACKFILL_PENDING_SQL)).limit(1)


def claimable_backfills(now: datetime, limit: int) -> sa.Select[Any]:
    """Routines (every column) with a PENDING backfill (its columns after them) that are live,
    enabled, unpaused, not due at ``now`` and have no non-terminal run; the routine rows locked,
    skipping those a concurrent claimer holds. Read through ``ix_backfills_pending``."""
    open_run = open_run_of_routine()
    stmt = (
        sa.select(routines, backfills)
        .select_from(
            backfills.join(
                routines,
                sa.and_(*(a == b for a, b in zip(_RT_KEY, _BF_KEY, strict=True))),
            )
        )
        .where(
            sa.text(BACKFILL_PENDING_SQL),
            routines.c.deleted_at.is_(None),
            routines.c.enabled.is_(True),
            routines.c.paused_reason.is_(None),
            sa.or_(routines.c.next_due_at.is_(None), routines.c.next_due_at > now),
            ~open_run,
        )
        .order_by(backfills.c.next_at, *_BF_KEY)
        .limit(limit)
    )
    return stmt.with_for_update(skip_locked=True, of=routines)


def move_backfills(rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Params]:
    """Set each range's ``next_at`` (executemany: at most ``limit`` rows per tick)."""
    b: dict[str, Any] = {c: sa.bindparam(f"b_{c}") for c in ("org", "uid", "routine_id")}
    stmt = (
        sa.update(backfills)
        .where(backfills.c.org == b["org"], backfills.c.uid == b["uid"], backfills.c.routine_id == b["routine_id"])
        .values(next_at=sa.bindparam("b_next_at", type_=UtcDateTime()))
    )
    return stmt, [{f"b_{k}": v for k, v in r.items()} for r in rows]


# ---------------------------------------------------------------------- prune and pruned_through


def prune_returning(before: datetime) -> Any:
    """Delete terminal runs finished before ``before``, returning every deleted row's key, origin and
    fire (aggregated by the caller; PostgreSQL's aggregate in the statement:
    :func:`alma_schedule.stores.postgres.queries.prune_returning`)."""
    gone = sa.delete(runs).where(in_states(*TERMINAL), runs.c.finished_at < before)
    return gone.returning(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.origin, runs.c.fire_at)


def raise_pruned_through(dialect: str, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Params]:
    """``pruned_through`` up to each row's ``fire`` (never down)."""
    return _batch_update_routines(
        dialect,
        "p",
        [("fire", UtcDateTime())],
        rows,
        {"pruned_through": "fire"},
        {},
        guard=lambda k: sa.or_(routines.c.pruned_through.is_(None), routines.c.pruned_through < k["fire"]),
    )


# ---------------------------------------------------------------------- routines of every scope


def _state_clause(state: str | None) -> Any:
    """The predicate of one of ``ROUTINE_STATES`` (see ``Store.system_routines``)."""
    c = routines.c
    on = sa.and_(c.enabled.is_(True), c.paused_reason.is_(None))
    clauses = {
        "enabled": sa.and_(on, c.next_due_at.is_not(None)),
        "paused": sa.and_(c.enabled.is_(True), c.paused_reason.is_not(None)),
        "disabled": c.enabled.is_(False),
        "finished": sa.and_(on, c.next_due_at.is_(None)),
        "erroring": c.error_count > 0,
    }
    return sa.true() if state is None else clauses[state]


def _listed(kind: str | None, state: str | None) -> list[Any]:
    where = [routines.c.deleted_at.is_(None), _state_clause(state)]
    if kind is not None:
        where.append(routines.c.kind == kind)
    return where


def system_routines(kind: str | None, state: str | None, limit: int, after: Sequence[str] | None) -> sa.Select[Any]:
    stmt = sa.select(routines).where(*_listed(kind, state))
    if after is not None:
        stmt = stmt.where(sa.tuple_(*_RT_KEY) > sa.tuple_(*after))
    return stmt.order_by(*_RT_KEY).limit(limit)


def system_routine_counts(kind: str | None, state: str | None) -> sa.Select[Any]:
    return (
        sa.select(routines.c.org, routines.c.uid, sa.func.count())
        .where(*_listed(kind, state))
        .group_by(routines.c.org, routines.c.uid)
        .order_by(routines.c.org, routines.c.uid)
    )
