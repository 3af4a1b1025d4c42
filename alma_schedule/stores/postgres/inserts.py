"""PostgreSQL's forms of the run inserts (:mod:`alma_schedule.stores.sql.queries.inserts`): ONE
``INSERT ... SELECT FROM unnest`` per batch (columns equal in every row bound once), optionally
carrying a short batch's check for held due rows and the ``max_runs`` count in the same statement."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from alma_schedule.model import RunRecord, RunState
from alma_schedule.stores.postgres.forms import CHECKED_INSTANT, POSTGRESQL
from alma_schedule.stores.sql.queries import inserts
from alma_schedule.stores.sql.queries.claim import due_exists_column, due_params
from alma_schedule.stores.sql.queries.claim_moves import count_params, count_statement
from alma_schedule.stores.sql.queries.common import Key3, Params, _unnest, lit
from alma_schedule.stores.sql.queries.forms import replaces
from alma_schedule.stores.sql.queries.inserts import _PK, FIRE_VARYING, Columns, record_columns
from alma_schedule.stores.sql.rows import record_values
from alma_schedule.stores.sql.schema import runs
from alma_schedule.stores.sql.types import UtcDateTime


@functools.lru_cache(maxsize=256)
def _insert_unnest(varying: frozenset[str], checked: bool) -> Any:
    """The INSERT ... SELECT FROM unnest of one set of varying columns (the others bound once);
    ``checked``: the arrays of instants hold checked aware UTC values (see :data:`CHECKED_INSTANT`)."""
    arrays = [(n, CHECKED_INSTANT if checked and isinstance(t, UtcDateTime) else t) for n, t in FIRE_VARYING]
    u = _unnest("i", [(name, typ) for name, typ in arrays if name in varying])
    values = [
        u.c[c.name] if c.name in varying else sa.cast(sa.bindparam(f"i_{c.name}", type_=c.type), c.type) for c in runs.c
    ]
    stmt = pg.insert(runs).from_select([c.name for c in runs.c], sa.select(*values)).on_conflict_do_nothing()
    return stmt.returning(*_PK)


def _unnest_insert(
    columns: Mapping[str, Sequence[Any]],
    first: Mapping[str, Any],
    checked: bool = False,
    rendered: Mapping[str, Any] | None = None,
) -> tuple[Any, Params]:
    # Columns with one value in every row are bound once; the others travel as arrays (the ones
    # ``rendered`` ahead, by column name, as rendered).
    varying = frozenset(n for n, _ in FIRE_VARYING if columns[n].count(columns[n][0]) != len(columns[n]))
    params = {f"i_{c.name}": first[c.name] for c in runs.c if c.name not in varying}
    ahead = rendered or {}
    return _insert_unnest(varying, checked), {**params, **{f"i_{n}": ahead.get(n, columns[n]) for n in varying}}


@replaces(inserts.insert_runs, POSTGRESQL)
def insert_runs(dialect: str, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Params]:
    """ONE ``INSERT ... SELECT FROM unnest(<arrays>)`` whatever the number of rows."""
    return _unnest_insert({name: [r[name] for r in rows] for name, _ in FIRE_VARYING}, rows[0])


@replaces(inserts.insert_records, POSTGRESQL)
def insert_records(
    dialect: str,
    recs: Sequence[RunRecord],
    held: tuple[datetime, Sequence[Key3]] | None = None,
    counting: Sequence[Mapping[str, Any]] = (),
    now: datetime | None = None,
    columns: Columns | None = None,
    rendered: Mapping[str, Any] | None = None,
) -> tuple[Any, Params]:
    """``held``: the short batch's check rides as a last ``RETURNING`` column; ``counting``: the
    ``max_runs`` count rides as a data-modifying CTE counting only rows returned ``claimed``."""
    columns = record_columns(recs) if columns is None else columns
    stmt, params = _unnest_insert(columns, record_values(recs[0]), checked=True, rendered=rendered)
    assert isinstance(params, Mapping)  # PostgreSQL binds arrays: one mapping
    if held is not None:
        at, besides = held
        stmt, params = _checking(stmt, bool(besides)), {**params, **due_params(at, besides)}
    if counting:
        if now is None:
            raise ValueError("the count in the INSERT needs its now")
        counted = count_params(dialect, counting, now)
        assert isinstance(counted, Mapping)
        stmt, params = _counting(stmt), {**params, **counted}
    return stmt, params


@functools.lru_cache(maxsize=512)
def _checking(stmt: Any, besides: bool) -> Any:
    return stmt.returning(due_exists_column(besides))


@functools.lru_cache(maxsize=512)
def _counting(stmt: Any) -> Any:
    """``stmt`` (an INSERT ... RETURNING) as the CTE ``i_made``, the count UPDATE a CTE reading it
    (a routine counted when its row came back ``claimed``), and the INSERT's own rows selected."""
    made = stmt.returning(runs.c.state.label("made_state")).cte("i_made")
    claimed = lit(RunState.CLAIMED)

    def inserted_claimed(k: Any) -> Any:
        return sa.exists(
            sa.select(sa.literal_column("1"))
            .select_from(made)
            .where(made.c.org == k["org"], made.c.uid == k["uid"], made.c.routine_id == k["routine_id"])
            .where(made.c.made_state == claimed)
        )

    counted = count_statement(POSTGRESQL, inserted_claimed).cte("m_counted")
    return sa.select(*[c for c in made.c if c.name != "made_state"]).add_cte(counted)
