"""Engines: how a URL becomes a configured SQLAlchemy :class:`~sqlalchemy.engine.Engine`.
docs/architecture.md, section "The modules, in detail" (stores/sql/engine.py).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url

from alma_schedule.compat.psycopg import register_binary_lists, set_prepare_threshold
from alma_schedule.errors import ConfigurationError, StoreError, missing_extra
from alma_schedule.stores.sql import liveness
from alma_schedule.stores.sql.errors import safe_url
from alma_schedule.stores.sql.namespace import SCHEMA_TOKEN, Namespace, sqlite_rewrite

SQLITE_MIN = (3, 35, 0)
SQLITE_BUSY_MS = 30_000
READ = {"alma_read": True}
#: Every PostgreSQL session: UTC (psycopg then returns ``datetime.UTC``-aware values, no conversion
#: per value), READ COMMITTED also for the statements run in autocommit mode (single CAS, reads), and
#: :data:`PG_PLAN_CACHE`.
PG_SESSION = r"-c TimeZone=UTC -c default_transaction_isolation=read\ committed"
#: The generic-plan trap: PostgreSQL switches a NAMED prepared statement to its cached GENERIC plan
#: after 5 custom ones when it looks no dearer, and psycopg names (prepares) a statement from its
#: 5th execution by default. A generic plan cannot see the length of our ``unnest`` key arrays (it
#: assumes 10 rows) nor the runs a batch just claimed, so the supersede UPDATE of a later batch
#: turned into a nested loop over every claimed run times the batch's keys (0.3-1.8 s per batch at
#: 1,000 keys; 10.9 s against 81 ms custom with 20,000 claimed runs, measured). So psycopg prepares
#: nothing on our connections (``prepare_threshold = None``, set on connect): every statement is sent
#: unnamed and planned for its parameters at each execution, whatever ``plan_cache_mode`` (the tick's
#: claim statements are prepared, in a transaction that sets ``force_custom_plan`` LOCALly:
#: :func:`..postgres.hot.begin_custom_plans`: parsed once, still planned at each execution). Only the
#: run side's two per-fire statements and the tick probe are prepared, explicitly (:mod:`..postgres.hot`: every
#: row the two touch is found by equality on a full key, and each probe arm is an ordered LIMIT 1
#: index probe, so their generic plan is their best plan; reusing it saves ~0.4-1 ms of planning per
#: fire and ~1.5 ms per tick). The mode is pinned to PostgreSQL's default, ``auto``, so a
#: database-level ``force_generic_plan`` cannot reach the unnamed statements either; set on our own
#: connections only, never on the database.
PG_PLAN_CACHE = "-c plan_cache_mode=auto"


def normalize_url(url: str | URL) -> URL:
    """Parse ``url``; ``postgresql://`` / ``postgres://`` get the psycopg 3 driver."""
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise ConfigurationError(f"ALMA_DATABASE_URL: {safe_url(url)} is not a database URL") from exc
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if parsed.get_driver_name() not in ("psycopg", "") and "+" in parsed.drivername:
            raise ConfigurationError(
                f"ALMA_DATABASE_URL: use postgresql+psycopg:// (psycopg 3), not {parsed.drivername}://"
            )
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise ConfigurationError(
                "ALMA_DATABASE_URL: an SQLite store needs a file (sqlite:///path); use memory:// for RAM"
            )
        return parsed
    raise ConfigurationError(
        f"ALMA_DATABASE_URL: unsupported store {safe_url(url)} (postgresql+psycopg://, sqlite:///, memory://)"
    )


def check_sqlite_version(version: tuple[int, ...] = sqlite3.sqlite_version_info) -> None:
    """Refuse an SQLite library without ``RETURNING`` (< 3.35)."""
    if tuple(version) < SQLITE_MIN:
        have = ".".join(str(v) for v in version)
        raise StoreError(f"SQLite {have} is too old: alma-schedule needs >= 3.35 (UPDATE/INSERT ... RETURNING)")


def make_engine(url: str | URL, *, schema: str | None = None, pool_size: int = 2, max_overflow: int = 2) -> Engine:
    """A configured engine for ``url`` whose statements reach the namespace ``schema`` (None: the
    default, ``alma``; validated as ``ALMA_DATABASE_SCHEMA``). No connection is opened here."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        space = Namespace.of(schema, "sqlite")
        return _sqlite_engine(parsed, space, pool_size=max(pool_size, 5), max_overflow=max(max_overflow, 20))
    space = Namespace.of(schema, "postgresql")
    try:
        import psycopg  # noqa: F401  (SQLAlchemy's psycopg dialect imports it in create_engine)
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "postgres", "a PostgreSQL store") from None
    engine = sa.create_engine(
        parsed,
        isolation_level="READ COMMITTED",
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=False,  # liveness.install: dead connections are found without a round trip
        pool_timeout=30,
        # LIFO: a tick's statements, one after the other, reuse the connection the last one returned
        # (FIFO alternated between the pooled ones: each statement woke a backend idle since the one
        # before, and after a VACUUM or ANALYZE of `runs` each of them re-planned its cached plans)
        pool_use_lifo=True,
        connect_args={
            "connect_timeout": 10,
            "application_name": "alma-schedule",
            "options": f"{PG_SESSION} {PG_PLAN_CACHE}",
        },
        execution_options={"schema_translate_map": {SCHEMA_TOKEN: space.name}},
    )

    @event.listens_for(engine, "connect")
    def _on_pg_connect(dbapi_conn: Any, _record: Any) -> None:
        # The batched statements pass arrays (unnest); psycopg's default TEXT array format quotes
        # each element through a regex. The binary format is ~4x cheaper and exact.
        register_binary_lists(dbapi_conn)
        set_prepare_threshold(dbapi_conn, None)  # nothing named but the hot statements (PG_PLAN_CACHE)

    liveness.install(engine)
    return engine


def _sqlite_engine(url: URL, space: Namespace, *, pool_size: int, max_overflow: int) -> Engine:
    check_sqlite_version()
    engine = sa.create_engine(
        url,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=60,
        connect_args={"timeout": SQLITE_BUSY_MS / 1000, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _on_begin)
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
            _set_wal(cur)
            cur.execute("PRAGMA synchronous=FULL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        read_only = conn.get_execution_options().get("alma_read", False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _prefix(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool
    ) -> tuple[str, Any]:
        return sqlite_rewrite(statement, space.name), parameters

    return engine


def _set_wal(cur: Any) -> None:
    """Switch to WAL. Changing the journal mode needs an exclusive lock and SQLite answers "database is
    locked" at once, without its busy handler, when another process opens the new file at the same
    moment: retry for the busy timeout."""
    import sqlite3
    import time

    deadline = time.monotonic() + SQLITE_BUSY_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
