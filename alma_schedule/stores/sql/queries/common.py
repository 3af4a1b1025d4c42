"""What every statement builder shares: literals, state tuples, dialect helpers, batched parameters.

Every SQL statement of the store is a named builder in this package (SQLAlchemy Core); no SQL lives
elsewhere. See :mod:`alma_schedule.stores.sql.queries`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.sql import ColumnElement

from alma_schedule.model import ACTIVE as _ACTIVE
from alma_schedule.model import NON_TERMINAL as _NON_TERMINAL
from alma_schedule.model import TERMINAL as _TERMINAL
from alma_schedule.model import WAITING as _WAITING
from alma_schedule.model import RunState
from alma_schedule.stores.sql.schema import routines, runs
from alma_schedule.stores.sql.types import UtcDateTime

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]]
Key3 = tuple[str, str, str]
Key4 = tuple[str, str, str, str]


def lit(value: str) -> ColumnElement[Any]:
    """A constant SQL string literal (our own constants only, never input)."""
    return sa.literal_column("'" + value.replace("'", "''") + "'")


def in_states(*states: str) -> ColumnElement[bool]:
    return runs.c.state.in_([lit(s) for s in states])


def owned_states(*states: str) -> list[ColumnElement[bool]]:
    """The state guard of a statement that reaches ONE run by its key: ``state = (SELECT '<state>')``
    for each owned state (ORed), a value the planner does not see, so that no plan, generic or made
    for the parameters, proves the predicate of an index of one state's runs (``ix_runs_expires``,
    ``ix_runs_resend``, ``ix_runs_poll``, ``ix_runs_active_since``) and reads that whole set filtered
    by key: statistics taken before a burst price those indexes as empty, and a plan cached then
    read a burst's claimed runs at every start. Plus, when every state is one of the routine's open
    run, the literal ``state IN (NON_TERMINAL)``: the predicate of ``uq_runs_one_active``, unique
    on (org, uid, routine_id) and holding the open runs only, so the planner reaches the run through
    it (fewer entries than the primary key or ``ix_runs_routine_fire``, which its estimate of one
    row per routine otherwise ties with the key, reading the routine's whole ledger); when every
    state is ``buffered``, the predicate of ``uq_runs_one_buffered`` (one row per routine) alike.
    Checked by EXPLAIN over an analyzed ledger and a burst (``tests/stores/test_sql_hot.py``)."""
    guards: list[ColumnElement[bool]] = [
        sa.or_(sa.false(), *(runs.c.state == sa.select(lit(s)).scalar_subquery() for s in states))
    ]
    if set(states) <= _NON_TERMINAL:
        guards.append(in_states(*NON_TERMINAL))
    elif set(states) <= _WAITING:
        guards.append(in_states(*_WAITING))
    return guards


NON_TERMINAL = tuple(s for s in RunState if s in _NON_TERMINAL)
ACTIVE = tuple(s for s in RunState if s in _ACTIVE)
TERMINAL = tuple(s for s in RunState if s in _TERMINAL)


def _insert(dialect: str, table: sa.Table) -> Any:
    return (pg.insert if dialect == "postgresql" else sqlite_dialect.insert)(table)


def dt(value: datetime | sa.BindParameter[Any] | None) -> sa.BindParameter[Any]:
    """A bound instant; a named parameter (a statement built once, its values given per execution) as is."""
    if isinstance(value, sa.BindParameter):
        return value
    return sa.bindparam(None, value, type_=UtcDateTime)


def routine_pk(org: str, uid: str, routine_id: str) -> ColumnElement[bool]:
    return sa.and_(routines.c.org == org, routines.c.uid == uid, routines.c.routine_id == routine_id)


def _unnest(name: str, columns: Sequence[tuple[str, sa.types.TypeEngine[Any]]]) -> Any:
    """PostgreSQL: ``unnest(:name_a, :name_b, ...) AS name(a, b, ...)`` over array parameters."""
    args = [sa.bindparam(f"{name}_{col}", type_=pg.ARRAY(typ)) for col, typ in columns]
    return sa.func.unnest(*args).table_valued(*(sa.column(col, typ) for col, typ in columns)).render_derived(name=name)


def _arrays(name: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    return {f"{name}_{col}": [r[col] for r in rows] for col in columns}


_KEY_COLS: list[tuple[str, sa.types.TypeEngine[Any]]] = [
    ("org", sa.Text()),
    ("uid", sa.Text()),
    ("routine_id", sa.Text()),
]


def ctid(table: Any) -> ColumnElement[Any]:
    """PostgreSQL's system column ``ctid`` (the row version's physical address) of ``table`` (a
    table or an alias), rendered qualified as its columns are."""
    return sa.column("ctid", _selectable=table)


def rows_at(table: sa.Table, ctids: sa.Select[Any]) -> ColumnElement[bool]:
    """PostgreSQL: the rows of ``table`` at the ``ctid`` values ``ctids`` selects (read in the
    statement's snapshot, or locked by its ``FOR UPDATE``), as ``ctid = ANY(ARRAY(...))``: a TID
    scan, one heap fetch per row, whatever the table's size or statistics (a join or an ``IN``
    on the key is planned from estimates, and was planned as a hash of a sequential scan of the
    whole table). A row a concurrent transaction updated after the statement's snapshot: when
    ``ctids`` read it unlocked, the TID scan finds the version the snapshot sees and the update
    follows it to the newest one, rechecking the statement's other conditions on the row (its
    key, its state: the CAS; PostgreSQL does not recheck the TIDs); when ``ctids`` locked it, the
    ctid is its newest version's, which the snapshot does not see: that row is left to the next
    sweep (every statement that takes rows so is a sweep that every tick repeats)."""
    return ctid(table) == sa.any_(sa.func.ARRAY(ctids.scalar_subquery().correlate(None)))


@functools.lru_cache(maxsize=32)
def _end_fires(
    dialect: str,
    name: str,
    state: str,
    reason: str,
    cas: Callable[[Any], ColumnElement[bool]],
    slot: Callable[[Any], ColumnElement[bool]],
    report: bool,
) -> Any:
    now = sa.bindparam(f"{name}_now", type_=UtcDateTime)
    values = {"state": lit(state), "reason": lit(reason), "state_at": now, "finished_at": now}
    twin = runs.alias(f"{name}_twin")
    if dialect == "postgresql":
        k = _unnest(name, [*_KEY_COLS, ("run_id", sa.Text())])
        # Each routine's one run in its slot, probed through the slot's unique partial index
        # (LATERAL ... LIMIT 1: a subquery the planner keeps, run once per key), with whether it
        # matches ``cas`` computed there; then only the matching ones are checked for the fire's own
        # key and found by their primary key, the CAS being the state just read (a join condition:
        # no partial index matches it). Written so, the statement costs O(fires) whatever the open
        # runs: with a constant state in the UPDATE's WHERE (on ``runs``, or on the probe's state,
        # which the planner then infers for ``runs`` too) the planner, whose statistics take open
        # runs to be few, scans that state's index and hashes EVERY such run of the table per batch.
        # The probe also returns the row's ``ctid``, and the UPDATE reads only the rows at the
        # probed ctids (``ctid = ANY(ARRAY(...))``: a TID scan, one heap fetch per run to end),
        # joined to the probe by the key, the state kept as the CAS. Joined by the key alone, the
        # planner (1,000 keys, half taken to match; the ledger's row count stale, VACUUM's
        # estimate drifts: 9,415 for 101,200 rows, measured) hashed a sequential scan of the
        # WHOLE ledger per batch: 45 of a 1,000-fire tick's 141 ms at 100,000 routines. A run a
        # concurrent transaction updated since the probe is rechecked on its key and state, not
        # its ctid (PostgreSQL's TID scan does not recheck its TIDs), so the CAS is what it was.
        r = runs.alias(f"{name}_slot")
        one = (
            sa.select(ctid(r).label("ctid"), r.c.run_id, r.c.state, r.c.origin)
            .where(r.c.org == k.c.org, r.c.uid == k.c.uid, r.c.routine_id == k.c.routine_id, slot(r.c))
            .limit(sa.literal_column("1"))  # one by the unique index
            .lateral(f"{name}_one")
        )
        probed = (
            k.c.org, k.c.uid, k.c.routine_id, k.c.run_id.label("fire_run_id"),
            one.c.ctid.label("slot_ctid"), one.c.run_id, one.c.state,
        )  # fmt: skip
        found = (
            sa.select(*probed, cas(one.c).label("matched"))
            .select_from(k.join(one, sa.true()))
            .cte(f"{name}_ending")
            .prefix_with("MATERIALIZED")
        )
        fresh = ~sa.exists().where(
            twin.c.org == found.c.org,
            twin.c.uid == found.c.uid,
            twin.c.routine_id == found.c.routine_id,
            twin.c.run_id == found.c.fire_run_id,
        )
        at_found = (
            rows_at(runs, sa.select(found.c.slot_ctid).where(found.c.matched)),  # a TID scan of these alone
            runs.c.org == found.c.org,
            runs.c.uid == found.c.uid,
            runs.c.routine_id == found.c.routine_id,
            runs.c.run_id == found.c.run_id,
            runs.c.state == found.c.state,
        )
        ending = sa.update(runs).values(values).where(*at_found, found.c.matched, fresh).returning(*runs.c)
        if not report:
            return ending
        # ``report``: every routine's run in its slot, its key, whether it matched, then the row it
        # became (NULLs where it was not ended): the UPDATE as a data-modifying CTE, joined back.
        ended = ending.cte(f"{name}_ended")
        joined = found.outerjoin(
            ended,
            sa.and_(
                ended.c.org == found.c.org,
                ended.c.uid == found.c.uid,
                ended.c.routine_id == found.c.routine_id,
                ended.c.run_id == found.c.run_id,
            ),
        )
        return sa.select(found.c.org, found.c.uid, found.c.routine_id, found.c.matched, *ended.c).select_from(joined)
    fresh = ~sa.exists().where(
        twin.c.org == runs.c.org,
        twin.c.uid == runs.c.uid,
        twin.c.routine_id == runs.c.routine_id,
        sa.tuple_(twin.c.org, twin.c.uid, twin.c.routine_id, twin.c.run_id).in_(
            sa.bindparam(f"{name}_fires", expanding=True)
        ),
    )
    keys: sa.BindParameter[Any] = sa.bindparam(f"{name}_routines", expanding=True)
    at_key = sa.tuple_(runs.c.org, runs.c.uid, runs.c.routine_id).in_(keys)
    stmt = sa.update(runs).values(values).where(at_key, cas(runs.c), fresh)
    if not report:
        return stmt.returning(*runs.c)
    # SQLite has no DML in a CTE: only the runs ended, in the reported shape (a routine whose open
    # run did not match is not reported: its fire falls to the caller's second insert)
    return stmt.returning(runs.c.org, runs.c.uid, runs.c.routine_id, sa.true().label("matched"), *runs.c)


def end_runs_for_fires(
    dialect: str,
    name: str,
    fires: Sequence[Key4],
    state: str,
    reason: str,
    now: datetime,
    cas: Callable[[Any], ColumnElement[bool]],
    slot: Callable[[Any], ColumnElement[bool]],
    *,
    report: bool = False,
) -> tuple[Any, Params]:
    """The runs of the routines of these fires ``(org, uid, routine_id, run_id)`` in their ``slot``
    (the predicate of a unique partial index: at most one such run per routine, given the columns
    of a table) that match ``cas`` (given the same) -> terminal ``state(reason)`` at ``now``,
    returned, each only while the fire's own run key does not exist (a duplicate fire ends
    nothing). ONE statement whatever the number of fires (PostgreSQL: ``unnest`` of key arrays
    named ``name``, each routine probed once; SQLite: row-value ``IN`` lists), built once per shape.

    ``report``: rows ``(org, uid, routine_id, matched, *runs columns)`` instead, one per routine of
    the fires whose slot holds a run (PostgreSQL): ``matched`` whether that run matched ``cas``,
    then the row it became, or NULLs where it was not ended (it did not match, the fire is a
    duplicate, or it changed since the probe read it). SQLite reports only the runs ended."""
    stmt = _end_fires(dialect, name, state, reason, cas, slot, report)
    if dialect == "postgresql":
        cols = ("org", "uid", "routine_id", "run_id")
        return stmt, {f"{name}_now": now, **{f"{name}_{c}": [f[i] for f in fires] for i, c in enumerate(cols)}}
    return stmt, {
        f"{name}_now": now,
        f"{name}_fires": [tuple(f) for f in fires],
        f"{name}_routines": [tuple(f[:3]) for f in fires],
    }


def open_slot(c: Any) -> ColumnElement[bool]:
    """The slot of ``uq_runs_one_active`` (given a table's columns): a routine's one non-terminal run."""
    slot: ColumnElement[bool] = c.state.in_([lit(s) for s in NON_TERMINAL])
    return slot


def open_run_of_routine() -> ColumnElement[bool]:
    """``EXISTS`` a non-terminal run of the outer query's routine row (correlated on its key)."""
    return (
        sa.select(sa.literal(1))
        .where(
            runs.c.org == routines.c.org,
            runs.c.uid == routines.c.uid,
            runs.c.routine_id == routines.c.routine_id,
            in_states(*NON_TERMINAL),
        )
        .exists()
    )
