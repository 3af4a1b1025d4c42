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
from alma_schedule.stores.sql.queries.forms import replaceable
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
    """The state guard of a statement that reaches ONE run by its key: each owned state as a value the
    planner does not see, plus the open-run (or buffered) unique index's predicate when it applies,
    so the planner reaches the run by that index.
    docs/architecture.md, section "The modules, in detail" (stores/sql/queries/common.py).
    """
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


#: Each dialect's ``INSERT`` with ``ON CONFLICT`` (SQLAlchemy's own constructs, the same interface).
_INSERTS: dict[str, Callable[[sa.Table], Any]] = {"postgresql": pg.insert, "sqlite": sqlite_dialect.insert}


def _insert(dialect: str, table: sa.Table) -> Any:
    return _INSERTS[dialect](table)


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
    """PostgreSQL: the rows of ``table`` at the ``ctid`` values ``ctids`` selects (a TID scan, one heap
    fetch per row). A row updated concurrently after ``ctids`` locked it is left to the next sweep.
    docs/architecture.md, section "The modules, in detail" (stores/sql/queries/common.py).
    """
    return ctid(table) == sa.any_(sa.func.ARRAY(ctids.scalar_subquery().correlate(None)))


@replaceable
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
    """The runs in ``slot`` of these fires' routines that match ``cas`` -> terminal ``state(reason)`` at
    ``now``, returned, unless the fire's own run key exists. ONE statement whatever the number of fires;
    ``report``: one row per routine with ``matched`` instead (PostgreSQL).
    docs/architecture.md, section "The modules, in detail" (stores/sql/queries/common.py).
    """
    return _end_fires(dialect, name, state, reason, cas, slot, report), end_fires_params(dialect, name, fires, now)


@replaceable
def end_fires_params(dialect: str, name: str, fires: Sequence[Key4], now: datetime) -> Params:
    """The parameters of :func:`end_runs_for_fires`' statement: row-value lists."""
    return {
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
