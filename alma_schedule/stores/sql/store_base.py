"""What every part of :class:`~alma_schedule.stores.sql.SqlStore` shares: the engine, transactions
behind the error boundary, the schema-version check, and key validation.

Every public method runs ``with self._tx() as conn:`` (ONE transaction: committed when the block
ends, rolled back if anything raises), ``self._tx(read=True)`` for reads (on SQLite a deferred
``BEGIN`` instead of ``BEGIN IMMEDIATE``) or ``self._tx(single=True)`` for one atomic statement
(autocommit on PostgreSQL). Driver errors leave as :class:`StoreError` subclasses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from alma_schedule.errors import SchemaMismatch
from alma_schedule.stores.sql import ahead, hot
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.engine import READ, make_engine, normalize_url
from alma_schedule.stores.sql.errors import mapped_errors, safe_url
from alma_schedule.stores.sql.namespace import Namespace
from alma_schedule.stores.sql.schema import HEAD_REVISION

RKey = tuple[str, str, str]


class Abort(Exception):
    """Raised inside a transaction to roll it back and return ``value`` instead."""

    def __init__(self, value: Any) -> None:
        super().__init__("rolled back")
        self.value = value


class SqlBase:
    """Engine, transactions and the schema check (see the module docstring)."""

    def __init__(self, url: str, *, schema: str | None = None, pool_size: int = 2, max_overflow: int = 2) -> None:
        self._url = normalize_url(url)
        self._engine = make_engine(self._url, schema=schema, pool_size=pool_size, max_overflow=max_overflow)
        self.dialect: str = self._engine.dialect.name
        #: ``Store.claim_concurrency``: PostgreSQL claims run at once on the pool's connections (row
        #: locks, SKIP LOCKED); SQLite has one writer (``BEGIN IMMEDIATE``).
        self.claim_concurrency: int = max(1, pool_size) if self.dialect == "postgresql" else 1
        self.namespace = Namespace.of(schema, self.dialect)
        self._schema_ok = False
        self._schema_lock = threading.Lock()

    @property
    def url(self) -> str:
        """The store URL with its password hidden."""
        return safe_url(self._url)

    @property
    def engine(self) -> sa.Engine:
        return self._engine

    @property
    def schema(self) -> str:
        """The store's namespace: its PostgreSQL schema, or its SQLite table prefix (without ``_``)."""
        return self.namespace.name

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r}, schema={self.schema!r})"

    @contextmanager
    def _tx(self, *, read: bool = False, single: bool = False, custom_plans: bool = False) -> Iterator[Connection]:
        """ONE transaction behind the error boundary.

        ``read``: only reads (SQLite: a deferred ``BEGIN``). ``single``: the block issues ONE
        write statement, or a sequence of independent compare-and-set statements each of which is
        atomic by itself. On PostgreSQL both run in autocommit mode: a statement is its own
        transaction, saving the BEGIN/COMMIT round trips (under READ COMMITTED every statement
        takes a fresh snapshot anyway, so a surrounding transaction would add no isolation).
        ``custom_plans`` (a write transaction, the tick's claims): on PostgreSQL it is opened by
        :func:`.hot.begin_custom_plans` (custom plans only, its batched statements prepared); on
        SQLite it changes nothing.
        """
        if not self._schema_ok:
            self._check_schema()
        pg = self.dialect == "postgresql"
        with mapped_errors(self._url), self._engine.connect() as conn:
            if pg and (read or single or custom_plans):
                conn.execution_options(isolation_level="AUTOCOMMIT")
            elif read:
                conn.execution_options(**READ)
            with conn.begin():
                if pg and custom_plans and not (read or single):
                    hot.begin_custom_plans(conn)
                yield conn

    def _rows(self, conn: Connection, stmt: Any, params: Any) -> list[Any]:
        """The rows of ``stmt`` (a statement built once in :mod:`.queries`): PostgreSQL through
        :func:`.hot.all_rows` (rendered once, sent unnamed: the driver's tuples), SQLite through
        SQLAlchemy (its rows: positional access reads both alike)."""
        if self.dialect == "postgresql":
            return hot.all_rows(conn, stmt, self.schema, params)
        return list(conn.execute(stmt, params).all())

    @contextmanager
    def _meanwhile(self, conn: Connection, *statements: tuple[Any, Any]) -> Iterator[list[Callable[[], list[Any]]]]:
        """:meth:`_rows` of each ``(stmt, params)``, in order, read by calling the function the block is
        given for it, AFTER the block: on PostgreSQL they are all sent on entry (:func:`.ahead.meanwhile`:
        pipeline mode) and the server runs them while the block's Python runs; their answers come at
        the block's end, in the one round trip :meth:`_rows` would have waited for. SQLite: executed
        on entry, in order."""
        if self.dialect == "postgresql":
            with ahead.meanwhile(conn, self.schema, statements) as answers:
                yield answers
            return
        yield [_answer(self._rows(conn, stmt, params)) for stmt, params in statements]

    def _exec(self, conn: Connection, stmt: Any, params: Any) -> None:
        """:meth:`_rows` of a statement whose rows (if any) nobody reads."""
        if self.dialect == "postgresql":
            hot.all_rows(conn, stmt, self.schema, params)
        else:
            conn.execute(stmt, params)

    def _check_schema(self) -> None:
        """Refuse to work on a database that is not at this code's revision (once per instance)."""
        with self._schema_lock:
            if self._schema_ok:
                return
            try:
                with mapped_errors(self._url), self._engine.connect() as conn:
                    conn.execution_options(**READ)
                    with conn.begin():
                        version = conn.execute(q.select_schema_version()).scalar()
            except SchemaMismatch:  # no version table of ours: a 0.1.0 store asks for `migrate --adopt`
                self._refuse_legacy()
                raise
            if version != HEAD_REVISION:
                self._refuse_legacy()
                raise SchemaMismatch(
                    f"store {self.url} ({self.namespace.describe()}) is at schema revision {version!r}, "
                    f"this version needs {HEAD_REVISION!r}: run `alma-schedule migrate`"
                )
            self._schema_ok = True

    def _refuse_legacy(self) -> None:
        """Raise :class:`~alma_schedule.errors.AdoptionRequired` when the database holds a 0.1.0 store."""
        from alma_schedule.stores.sql.migrate import adoption_required, legacy_tables

        with mapped_errors(self._url), self._engine.connect() as conn, conn.begin():
            legacy = legacy_tables(conn, self.namespace)
        if legacy is not None:
            raise adoption_required(self.namespace, self.url, legacy[0])

    def dispose(self) -> None:
        """Forget pooled connections WITHOUT closing them (call in a child after ``fork``)."""
        self._engine.dispose(close=False)

    def close(self) -> None:
        """Release connections."""
        self._engine.dispose()


def _answer(rows: list[Any]) -> Callable[[], list[Any]]:
    """The answer of a statement executed already: its rows."""
    return lambda: rows
