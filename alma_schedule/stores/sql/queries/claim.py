"""SQL statements of the store, ``claim_due``: the due scan, batched cursor moves, supersession and
run inserts.
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/claim.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement

from alma_schedule.model import DueKey, Fire, Routine
from alma_schedule.policies import backoff, missed, supersession
from alma_schedule.stores.sql.queries.common import (
    _KEY_COLS,
    Key3,
    Key4,
    Params,
    _unnest,
    ctid,
    end_runs_for_fires,
    lit,
    open_slot,
)
from alma_schedule.stores.sql.queries.forms import replaceable
from alma_schedule.stores.sql.schema import routines, runs
from alma_schedule.stores.sql.types import UtcDateTime

_NOW = sa.bindparam("c_now", type_=UtcDateTime)
_LIMIT = sa.bindparam("c_limit", type_=sa.Integer)
_AFTER = sa.tuple_(*(sa.bindparam(f"c_after_{c}", type_=t) for c, t in [("next_due_at", UtcDateTime()), *_KEY_COLS]))
_DUE_ORDER = (routines.c.next_due_at, routines.c.org, routines.c.uid, routines.c.routine_id)
_PK = (runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)


def due_routine(now: Any) -> ColumnElement[bool]:
    """A routine ``claim_due`` locks at ``now`` (a datetime or a bound parameter; also the tick
    probe's ``due``)."""
    return sa.and_(
        routines.c.next_due_at <= now,
        # not policies.backoff.held_back(defer_until, now), set-based
        sa.or_(routines.c.defer_until.is_(None), routines.c.defer_until <= now),
        routines.c.deleted_at.is_(None),
        routines.c.enabled.is_(True),
        routines.c.paused_reason.is_(None),
    )


def _due_other_than(besides: bool, after: bool = False) -> tuple[ColumnElement[bool], ...]:
    """The due predicate; ``besides`` (PostgreSQL only): not one of the routine keys bound as three
    arrays ``c_b_*`` (``NOT IN`` a subquery over ``unnest``: hashed, where a list of row values is
    compared row by row, 1,000 keys times every row scanned); ``after``: past the due key ``c_after_*``
    in the index order (one bound of the index scan)."""
    other: tuple[ColumnElement[bool], ...] = ()
    if besides:
        keys = sa.select(*_unnest("c_b", _KEY_COLS).c)
        other += (sa.tuple_(routines.c.org, routines.c.uid, routines.c.routine_id).not_in(keys),)
    if after:
        other += (sa.tuple_(*_DUE_ORDER) > _AFTER,)
    return (due_routine(_NOW), *other)


def _params(now: datetime, besides: Sequence[Key3], after: DueKey | None = None, **more: Any) -> dict[str, Any]:
    params = {"c_now": now, **more}
    if besides:
        org, uid, routine_id = (list(c) for c in zip(*besides, strict=True))
        params.update(c_b_org=org, c_b_uid=uid, c_b_routine_id=routine_id)
    if after is not None:
        at, org_, uid_, rid = after
        params.update(c_after_next_due_at=at, c_after_org=org_, c_after_uid=uid_, c_after_routine_id=rid)
    return params


def _planning_columns() -> list[Any]:
    """Every ``routines`` column in order, with the schedule as JSON text and no definition."""
    return [
        sa.cast(c, sa.Text).label(c.name)
        if c.name == "schedule"
        else sa.null().label(c.name)
        if c.name == "definition"
        else c
        for c in routines.c
    ]


@functools.lru_cache(maxsize=64)
def _select_due(lock: bool, wait: bool, besides: bool, planning: bool, after: bool, at: bool) -> sa.Select[Any]:
    columns = _planning_columns() if planning else [routines]
    if at:
        columns = [*columns, sa.cast(ctid(routines), sa.Text).label("row_at")]
    stmt = sa.select(*columns).where(*_due_other_than(besides, after)).order_by(*_DUE_ORDER).limit(_LIMIT)
    return stmt.with_for_update(skip_locked=not wait, of=routines) if lock else stmt


def select_due(
    now: datetime,
    limit: int,
    *,
    lock: bool,
    wait: bool = False,
    besides: Sequence[Key3] = (),
    planning: bool = False,
    after: DueKey | None = None,
    at: bool = False,
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """Due routines, oldest ``next_due_at`` first, other than ``besides``, skip-locked (or ``wait``: locked
    in the same order, so claimers cannot deadlock); ``after``: only past this due key; ``planning``: the
    planning columns; ``at``: each row's ``ctid`` as a last column.
    docs/architecture.md, section "The modules, in detail" (stores/sql/queries/claim.py).
    """
    stmt = _select_due(lock, wait, bool(besides), planning, after is not None, at)
    return stmt, _params(now, besides, after, c_limit=limit)


@functools.lru_cache(maxsize=4)
def _due_exists(besides: bool) -> sa.Select[Any]:
    first: sa.Select[Any] = (
        sa.select(sa.literal_column("1"))
        .select_from(routines)
        .where(*_due_other_than(besides))
        .order_by(routines.c.next_due_at)
        .limit(1)
    )
    return sa.select(first.scalar_subquery().is_not(None))


def due_exists_column(besides: bool) -> Any:
    """:func:`due_exists` as a boolean scalar subquery (another statement's column), its parameters
    :func:`due_params`."""
    return _due_exists(besides).scalar_subquery().label("held_due")


def due_params(now: datetime, besides: Sequence[Key3] = ()) -> dict[str, Any]:
    """The parameters of :func:`due_exists` and :func:`due_exists_column`."""
    return _params(now, besides)


def due_exists(now: datetime, besides: Sequence[Key3] = ()) -> tuple[sa.Select[Any], dict[str, Any]]:
    """Whether a routine other than ``besides`` is due at ``now`` (no lock: after a short batch, such
    a row is one that a concurrent transaction held while the batch locked). The first such row in
    ``ix_routines_due`` order, ``LIMIT 1``, not ``EXISTS``: PostgreSQL drops the order of an
    ``EXISTS``, and statistics taken while many routines were due then plan a scan of the whole
    table for a row that is not there (as :mod:`.probe` explains)."""
    return _due_exists(bool(besides)), _params(now, besides)


#: How long the claim of held due rows waits for one (PostgreSQL; a longer hold is left to the next tick).
HELD_LOCK_WAIT = sa.text("SET LOCAL lock_timeout = '2s'")


def _update_stmt(
    dialect: str,
    name: str,
    columns: Sequence[tuple[str, sa.types.TypeEngine[Any]]],
    sets: Mapping[str, str],
    consts: Mapping[str, Any],
    guard: Callable[[Any], Any] | None = None,
    computed: Mapping[str, Callable[[Any], Any]] | None = None,
) -> Any:
    """One UPDATE of many routine rows: ``sets`` maps a column to a row field name; ``consts`` maps
    a column to an expression (``_NOW`` is bound per call); ``computed`` maps a column to a function
    of the row's fields (``k["field"]``) giving an expression. PostgreSQL: over ``unnest`` of arrays
    ``<name>_<field>``; SQLite: executemany of ``<name>_<field>`` values."""
    more = computed or {}
    k = row_fields(dialect, name, columns)
    stmt = (
        sa.update(routines)
        .values({**{c: k[f] for c, f in sets.items()}, **consts, **{c: fn(k) for c, fn in more.items()}})
        .where(routines.c.org == k["org"], routines.c.uid == k["uid"], routines.c.routine_id == k["routine_id"])
    )
    return stmt.where(guard(k)) if guard is not None else stmt


@replaceable
def row_fields(dialect: str, name: str, columns: Sequence[tuple[str, sa.types.TypeEngine[Any]]]) -> Any:
    """The fields of the rows a batched UPDATE applies, by name: bound ``<name>_<field>`` (executemany)."""
    return {col: sa.bindparam(f"{name}_{col}", type_=typ) for col, typ in [*_KEY_COLS, *columns]}


def _batch_update_routines(
    dialect: str,
    name: str,
    columns: Sequence[tuple[str, sa.types.TypeEngine[Any]]],
    rows: Sequence[Mapping[str, Any]],
    sets: Mapping[str, str],
    consts: Mapping[str, Any],
    guard: Callable[[Any], Any] | None = None,
    computed: Mapping[str, Callable[[Any], Any]] | None = None,
) -> tuple[Any, Params]:
    """:func:`_update_stmt` built for this call (``consts`` may hold values), with its parameters:
    the rarer batched UPDATEs (zone reconciliation, backfill pruning) use it."""
    stmt = _update_stmt(dialect, name, columns, sets, consts, guard, computed)
    fields = [c for c, _ in columns]
    params = _batch_params(dialect, name, fields, rows, None)
    return stmt, params


@replaceable
def _batch_params(
    dialect: str, name: str, fields: Sequence[str], rows: Sequence[Mapping[str, Any]], now: datetime | None
) -> Params:
    """One parameter set per row (executemany), ``c_now`` in each when given."""
    names = ["org", "uid", "routine_id", *fields]
    bound = {} if now is None else {"c_now": now}
    return [{**{f"{name}_{f}": r[f] for f in names}, **bound} for r in rows]


@replaceable
def _instant(dialect: str) -> sa.types.TypeEngine[Any]:
    """The type of the instants a claim binds (already checked aware UTC)."""
    return UtcDateTime()


#: :data:`alma_schedule.policies.missed.CAP` as SQL (a constant: no parameter of its own).
_CAP = sa.literal_column(str(missed.CAP), sa.BigInteger())


@functools.lru_cache(maxsize=8)
def _advance(dialect: str, counting: bool = False) -> Any:
    """The cursor moves; ``counting``: each fire's collapsed fires ``a_missed`` added to its routine's
    count in the same UPDATE (:func:`alma_schedule.policies.missed.add`, set-based), a shape of its
    own so a batch that collapsed nothing (every steady tick) sends what it always did."""
    columns: list[tuple[str, sa.types.TypeEngine[Any]]] = [
        ("fire", _instant(dialect)),
        ("next_due_at", _instant(dialect)),
    ]
    computed: dict[str, Callable[[Any], Any]] = {}
    if counting:
        columns.append(("missed", sa.BigInteger()))
        computed = {
            "fires_missed": lambda k: routines.c.fires_missed + k["missed"],
            "fires_missed_capped": lambda k: sa.or_(routines.c.fires_missed_capped, k["missed"] >= _CAP),
        }
    return _update_stmt(
        dialect,
        "a",
        columns,
        {"last_fire": "fire", "next_due_at": "next_due_at"},
        {**backoff.CLEAR.fields(), "updated_at": _NOW},
        guard=lambda k: sa.or_(routines.c.last_fire.is_(None), routines.c.last_fire < k["fire"]),
        computed=computed,
    )


@replaceable
def advance_cursors(
    dialect: str,
    fires: Sequence[tuple[Routine, Fire]],
    now: datetime,
    at: Sequence[str] | None = None,
    counting: bool = False,
) -> tuple[Any, Params]:
    """Move each cursor to its fire (only forward: ``last_fire < fire``) and set ``next_due_at``;
    ``at`` (PostgreSQL): reach the rows by their locked ``ctid``; ``counting``: add collapsed fires to
    ``fires_missed``.
    docs/architecture.md, section "The modules, in detail" (stores/sql/queries/claim.py).
    """
    rows = [
        {
            "org": r.org,
            "uid": r.uid,
            "routine_id": r.routine_id,
            "fire": f.fire_at,
            "next_due_at": f.next_due_at,
            "missed": f.fires_missed,
        }
        for r, f in fires
    ]
    fields = ("fire", "next_due_at", "missed") if counting else ("fire", "next_due_at")
    return _advance(dialect, counting), _batch_params(dialect, "a", fields, rows, now)


def _supersedable(c: Any) -> ColumnElement[bool]:
    return sa.and_(c.state == lit(supersession.SUPERSEDABLE_STATE), c.origin == lit(supersession.SUPERSEDABLE_ORIGIN))


@replaceable
def supersede(
    dialect: str,
    fires: Sequence[Key4],
    now: datetime,
    advancing: Sequence[tuple[Routine, Fire]] = (),
    at: Sequence[str] | None = None,
    counting: bool = False,
) -> tuple[Any, Params]:
    """Older schedule ``claimed`` runs of these fires' routines -> ``skipped(missed)`` (CAS), unless the
    fire's own run key exists. Rows ``(org, uid, routine_id, matched, *runs columns)``; ``advancing``
    (PostgreSQL): carries :func:`advance_cursors` in the same statement.
    docs/architecture.md, section "The modules, in detail" (stores/sql/queries/claim.py).
    """
    state, reason = supersession.SUPERSEDED
    stmt, params = end_runs_for_fires(dialect, "s", fires, state, reason, now, _supersedable, open_slot, report=True)
    if advancing:
        raise ValueError("only PostgreSQL's form carries the cursor moves in the supersede's statement")
    return stmt, params
