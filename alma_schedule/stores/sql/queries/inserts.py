"""SQL statements of the store: the run rows ``claim_due`` and ``claim_backfills`` insert, ONE
statement per batch (PostgreSQL ``unnest``; SQLite executemany), built once per shape.
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/inserts.py).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.model import RunRecord
from alma_schedule.stores.sql.queries.common import Key3, Params, _insert
from alma_schedule.stores.sql.queries.forms import replaceable
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
    ("due_at", UtcDateTime()),  # jitter: each fire's own due instant
)


_VARYING_NAMES = tuple(name for name, _ in FIRE_VARYING)
#: A record's :data:`FIRE_VARYING` values, in one call (the columns are then one transposition).
_varying_of = operator.attrgetter(*_VARYING_NAMES)


@functools.lru_cache(maxsize=8)
def _insert_each(dialect: str) -> Any:
    return _insert(dialect, runs).on_conflict_do_nothing().returning(*_PK)


@replaceable
def insert_runs(dialect: str, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Params]:
    """Insert run rows with an UNTARGETED ``ON CONFLICT DO NOTHING`` (a targeted one would raise on the
    partial unique index), returning the KEYS of the rows actually inserted. PostgreSQL: ONE
    ``INSERT ... SELECT FROM unnest(<arrays>)`` whatever the number of rows (columns outside
    :data:`FIRE_VARYING` are taken from the first row, and so are those equal in every row);
    SQLite: executemany."""
    return _insert_each(dialect), list(rows)


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


@replaceable
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
    row; their instants are checked aware UTC: PostgreSQL binds them without a per-element check).
    docs/architecture.md, section "The modules, in detail" (stores/sql/queries/inserts.py).
    """
    if held is not None or counting:
        raise ValueError("only PostgreSQL's form carries the held rows' check and the count in the INSERT")
    return insert_runs(dialect, [record_values(r) for r in recs])
