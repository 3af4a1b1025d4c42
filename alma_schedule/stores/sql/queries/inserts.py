"""SQL statements of the store, the run rows ``claim_due`` (and ``claim_backfills``) insert: ONE
``INSERT ... SELECT FROM unnest`` per batch on PostgreSQL, executemany on SQLite; on PostgreSQL the
INSERT of a short batch also carries the batch's check for due rows other transactions held (a
column of its ``RETURNING``: :func:`insert_records`).

Built once per shape (``functools.lru_cache``), like :mod:`.claim`.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from alma_schedule.model import RunRecord, RunState
from alma_schedule.stores.sql.queries.claim import CHECKED_INSTANT, due_exists_column, due_params
from alma_schedule.stores.sql.queries.claim_moves import count_params, count_statement
from alma_schedule.stores.sql.queries.common import Key3, Params, _insert, _unnest, lit
from alma_schedule.stores.sql.rows import record_values
from alma_schedule.stores.sql.schema import runs
from alma_schedule.stores.sql.types import UtcDateTime

_PK = (runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)

#: Run columns that differ between the rows one ``claim_due`` inserts; every other column has the
#: same value in all of them (``claimed_at = state_at = now``, zeros, empty lists, NULLs).
FIRE_VARYING: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (
    ("org", sa.Text()),
    ("uid", sa.Text()),
    ("routine_id", sa.Text()),
    ("run_id", sa.Text()),
    ("state", sa.Text()),
    ("reason", sa.Text()),
    ("origin", sa.Text()),
    ("config_revision", sa.Text()),
    ("fire_at", UtcDateTime()),
    ("expires_at", UtcDateTime()),
    ("resend_at", UtcDateTime()),
    ("finished_at", UtcDateTime()),
    ("due_at", UtcDateTime()),  # jitter (issue 15): each fire's own due instant
)


_VARYING_NAMES = tuple(name for name, _ in FIRE_VARYING)
#: A record's :data:`FIRE_VARYING` values, in one call (the columns are then one transposition).
_varying_of = operator.attrgetter(*_VARYING_NAMES)


@functools.lru_cache(maxsize=8)
def _insert_each(dialect: str) -> Any:
    return _insert(dialect, runs).on_conflict_do_nothing().returning(*_PK)


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


def insert_runs(dialect: str, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Params]:
    """Insert run rows with an UNTARGETED ``ON CONFLICT DO NOTHING`` (a targeted one would raise on the
    partial unique index), returning the KEYS of the rows actually inserted. PostgreSQL: ONE
    ``INSERT ... SELECT FROM unnest(<arrays>)`` whatever the number of rows (columns outside
    :data:`FIRE_VARYING` are taken from the first row, and so are those equal in every row);
    SQLite: executemany."""
    if dialect != "postgresql":
        return _insert_each(dialect), list(rows)
    return _unnest_insert({name: [r[name] for r in rows] for name, _ in FIRE_VARYING}, rows[0])


#: The :data:`FIRE_VARYING` columns of some run records, one list per column, in the records' order.
Columns = dict[str, list[Any]]


def record_columns(recs: Sequence[RunRecord]) -> Columns:
    """The :data:`FIRE_VARYING` values of ``recs`` as columns (one transposition), for
    :func:`insert_records`; a caller may build them ahead and patch a row with :func:`patch_columns`."""
    return dict(zip(_VARYING_NAMES, (list(c) for c in zip(*map(_varying_of, recs), strict=True)), strict=True))


def patch_columns(columns: Columns, i: int, rec: RunRecord, rendered: dict[str, Any] | None = None) -> None:
    """Row ``i`` of ``columns`` rewritten from ``rec`` (the record that replaces the one it was built
    from); a column that changed loses its array rendered ahead (``rendered``, by column name)."""
    for name, value in zip(_VARYING_NAMES, _varying_of(rec), strict=True):
        column = columns[name]
        if column[i] is not value and column[i] != value:
            column[i] = value
            if rendered:
                rendered.pop(name, None)


def insert_records(
    dialect: str,
    recs: Sequence[RunRecord],
    held: tuple[datetime, Sequence[Key3]] | None = None,
    counting: Sequence[Mapping[str, Any]] = (),
    now: datetime | None = None,
    columns: Columns | None = None,
    rendered: Mapping[str, Any] | None = None,
) -> tuple[Any, Params]:
    """:func:`insert_runs` of the run records ``claim_due`` made (read by attribute: no mapping per
    row; their instants are checked aware UTC: :data:`~.claim.CHECKED_INSTANT`).

    ``held`` (PostgreSQL only): ``(now, besides)`` of a short batch's check for due rows other
    transactions held (:func:`~.claim.due_exists`), carried as a last ``RETURNING`` column of every
    row (an uncommitted subquery, evaluated once: one round trip fewer than its own statement). It
    reads the routines as the INSERT's snapshot sees them, as its own statement just after would.

    ``counting`` (PostgreSQL only): the rows of :func:`~.claim.count_claims` (``{org, uid,
    routine_id, max_runs}``) of the fires of limited routines, at ``now``; their count rides in the
    same statement, a data-modifying CTE that counts a routine only when this INSERT returned its
    row ``claimed`` (a fire that lost to a run or was a duplicate never counts): the statement
    :func:`~.claim.count_claims` would have run after it, one round trip fewer. The rows returned
    are the same. ``columns`` (PostgreSQL): :func:`record_columns` of ``recs``, built ahead;
    ``rendered``: some of them rendered ahead as well (by column name: the store's
    ``hot.array_literal`` of the column as it is)."""
    if dialect != "postgresql":
        if held is not None or counting:
            raise ValueError("only PostgreSQL carries the held rows' check and the count in the INSERT")
        return insert_runs(dialect, [record_values(r) for r in recs])
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

    counted = count_statement("postgresql", inserted_claimed).cte("m_counted")
    return sa.select(*[c for c in made.c if c.name != "made_state"]).add_cte(counted)
