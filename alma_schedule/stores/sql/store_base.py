"""What every part of :class:`~alma_schedule.stores.sql.SqlStore` shares: the engine, transactions
behind the error boundary, the schema-version check, and key validation.
docs/architecture.md, section "The modules, in detail" (stores/sql/store_base.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from alma_schedule.errors import SchemaMismatch
from alma_schedule.stores.postgres.driver import driver_for
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.driver import Portable
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

    def __init__(
        self, url: str, *, schema: str | None = None, pool_size: int = 2, max_overflow: int = 2, portable: bool = False
    ) -> None:
        """``portable``: the portable driver on every backend (PostgreSQL's speed off: for testing)."""
        self._url = normalize_url(url)
        self._engine = make_engine(self._url, schema=schema, pool_size=pool_size, max_overflow=max_overflow)
        self.dialect: str = self._engine.dialect.name
        self.namespace = Namespace.of(schema, self.dialect)
        #: how statements run: portable, or PostgreSQL's (:mod:`alma_schedule.stores.postgres.driver`)
        self._driver = (
            Portable(self.namespace.name) if portable else driver_for(self.dialect, self.namespace.name, pool_size)
        )
        #: ``FastClaims.claim_concurrency``: PostgreSQL claims on its pool's connections; SQLite: 1
        self.claim_concurrency: int = self._driver.claim_concurrency
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

        ``read``: only reads (SQLite: a deferred ``BEGIN``). ``single``: the block issues ONE write
        statement, or independent compare-and-set statements each atomic by itself. ``custom_plans``:
        the tick's claims. The last two change nothing in the portable driver (:mod:`.driver`).
        """
        if not self._schema_ok:
            self._check_schema()
        with mapped_errors(self._url), self._engine.connect() as conn:
            self._driver.configure(conn, read=read, single=single, custom_plans=custom_plans)
            with conn.begin():
                self._driver.began(conn, read=read, single=single, custom_plans=custom_plans)
                yield conn

    def _rows(self, conn: Connection, stmt: Any, params: Any) -> list[Any]:
        """The rows of ``stmt`` (:meth:`.driver.Portable.rows`)."""
        return self._driver.rows(conn, stmt, params)

    def _meanwhile(
        self, conn: Connection, *statements: tuple[Any, Any]
    ) -> AbstractContextManager[list[Callable[[], list[Any]]]]:
        """The rows of each statement, read after the block (:meth:`.driver.Portable.meanwhile`)."""
        return self._driver.meanwhile(conn, statements)

    def _exec(self, conn: Connection, stmt: Any, params: Any) -> None:
        """:meth:`_rows` of a statement whose rows (if any) nobody reads."""
        self._driver.exec(conn, stmt, params)

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
