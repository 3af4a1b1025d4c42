"""Helpers of the SQL store tests: shared migrated databases, reset between tests, and raw access.

Creating and migrating a PostgreSQL database per test would dominate the run time, so a test class
gets ONE migrated database and each test starts from emptied tables (a fresh, EMPTY store, as the
contract asks). SQLite tests copy a migrated template file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from alma_schedule.stores.sql import SqlStore, migrate_store
from alma_schedule.stores.sql.schema import metadata
from tests.pg_support import migrated_pg_database

#: Seconds a test waits for a pipelined write to reach the server (a deadline, not a timing).
PIPELINE_WAIT = 30.0

PG_ADMIN = os.environ.get("ALMA_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
TABLES = ("runs", "routine_versions", "routines", "spend", "heartbeat", "backfills")


def pg_admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


def libpq_url(sa_url: str, schema: str = "alma") -> str:
    """The psycopg (libpq) form of a SQLAlchemy URL, whose unqualified names resolve to the store's
    schema first (``search_path``: a convenience of the tests' raw SQL; the store never sets it)."""
    base = sa_url.replace("postgresql+psycopg://", "postgresql://", 1)
    return f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}%2Cpublic"


@contextmanager
def pg_database(*, migrated: bool = True) -> Iterator[str]:
    """A new PostgreSQL database (migrated unless told otherwise: a clone of the run's migrated
    template, tests/conftest.py), dropped afterwards."""
    if migrated:
        with migrated_pg_database() as url:
            yield url
        return
    name = f"alma_test_{uuid.uuid4().hex[:12]}"
    pg_admin(f'CREATE DATABASE "{name}"')
    # Test databases only: commits need not wait for the WAL flush (crash durability is not what
    # these tests examine; atomicity and isolation are unaffected). The store never sets this.
    pg_admin(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    url = f"{base}/{name}"
    try:
        if migrated:
            migrate_store(url)
        yield url
    finally:
        pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def empty_pg(url: str) -> None:
    """Empty every table (DELETE: far cheaper than TRUNCATE on tables this small)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("; ".join(f"DELETE FROM {t}" for t in TABLES))


def empty_store(store: SqlStore) -> None:
    """Empty every table through the store's own pool (no new connection)."""
    with store.engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            conn.execute(table.delete())


def table_name(url: str, base: str, schema: str = "alma") -> str:
    """What one of our tables is called in raw SQL: ``alma.runs`` (PostgreSQL), ``alma_runs`` (SQLite)."""
    return f"{schema}.{base}" if url.startswith("postgresql") else f"{schema}_{base}"


@contextmanager
def fast_dir() -> Iterator[Path]:
    """A scratch directory on tmpfs when there is one (SQLite's fsyncs cost nothing there; the
    store still runs with synchronous=FULL), removed afterwards."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="alma-sqlite-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def sqlite_template(directory: Path) -> Iterator[Path]:
    path = directory / "template.sqlite3"
    migrate_store(f"sqlite:///{path}")
    yield path


def sqlite_copy(template: Path, directory: Path) -> str:
    target = directory / f"store-{uuid.uuid4().hex[:8]}.sqlite3"
    shutil.copyfile(template, target)
    return f"sqlite:///{target}"


@contextmanager
def opened(url: str, **kw: Any) -> Iterator[SqlStore]:
    store = SqlStore(url, **kw)
    try:
        yield store
    finally:
        store.close()


def index_ddl(url: str, schema: str = "alma") -> dict[str, str]:
    """Each index of the store's namespace as the database reports it (partial predicates included)."""
    import re

    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "postgresql":
                rows = conn.execute(
                    sa.text("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = :s"), {"s": schema}
                )
            else:
                rows = conn.exec_driver_sql(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
                )
            out = {name: re.sub(r"\s+", " ", ddl or "").replace('"', "") for name, ddl in rows}
            postgres = engine.dialect.name == "postgresql"
            return {k: v for k, v in out.items() if (postgres or k.startswith(f"{schema}_")) and not k.endswith("_pkc")}
    finally:
        engine.dispose()


def namespaced_metadata(url: str, schema: str = "alma") -> Any:
    """The declared metadata under the names the namespace gives it in the database (PostgreSQL: in
    ``schema``; SQLite: ``schema_``-prefixed tables and indexes), for Alembic's comparison."""
    import sqlalchemy as sa

    real = sa.MetaData()
    postgres = url.startswith("postgresql")
    for table in metadata.sorted_tables:
        if postgres:
            table.to_metadata(real, schema=schema)
        else:
            copy = table.to_metadata(real, schema=None, name=f"{schema}_{table.name}")
            for index in copy.indexes:
                index.name = f"{schema}_{index.name}"
    return real


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan, depth first."""
    yield plan
    for child in plan.get("Plans", ()):
        yield from plan_nodes(child)


def explain_plan(
    conninfo: str,
    statement: str,
    params: dict[str, Any] | list[Any],
    *,
    without: tuple[str, ...] = (),
    mode: str = "force_generic_plan",
) -> dict[str, Any]:
    """EXPLAIN the generic plan of ``statement`` PREPAREd exactly as it was sent (SQLAlchemy's ``%(name)s``
    text and its parameters, or a ``$n`` text and a positional list) (``without`` these
    indexes: dropped in a transaction that is rolled back; ``mode="force_custom_plan"``: the plan
    for these very parameters, as the store's own connections plan it)."""
    names: list[str] = []

    def placeholder(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    if isinstance(params, list):  # a statement of stores/postgres/hot.py: already $n, positional
        server_side, values = statement, params
    else:
        server_side = re.sub(r"%\((\w+)\)s", placeholder, statement).replace("%%", "%")
        values = [params[n] for n in names]
    with psycopg.connect(conninfo) as conn:
        for index in without:
            conn.execute(f"DROP INDEX {index}")  # type: ignore[arg-type]
        conn.execute(f"SET LOCAL plan_cache_mode = {mode}")  # type: ignore[arg-type]
        conn.execute(f"PREPARE probe AS {server_side}")  # type: ignore[arg-type]
        cur = psycopg.ClientCursor(conn)
        args = ", ".join(["%s"] * len(values))
        cur.execute(f"EXPLAIN (FORMAT JSON) EXECUTE probe({args})", values)  # type: ignore[arg-type]
        row = cur.fetchone()
        assert row is not None
        plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
        conn.rollback()
        return plan[0]["Plan"]  # type: ignore[no-any-return]


def heartbeat_locked(store: SqlStore, *, wait: bool = False) -> bool:
    """Whether a transaction holds the heartbeat row (an uncommitted write of it), asked on another
    pooled connection of ``store``. ``wait``: asked again until it is (at most :data:`PIPELINE_WAIT`
    seconds): a pipelined write is sent, and the server runs it when the bytes arrive."""
    import sqlalchemy as sa

    deadline = time.monotonic() + PIPELINE_WAIT
    while True:
        with store.engine.connect() as conn:
            try:
                conn.exec_driver_sql(f'SELECT 1 FROM "{store.schema}".heartbeat FOR UPDATE NOWAIT')
            except sa.exc.OperationalError as exc:
                assert "lock" in str(exc).lower()
                return True
            finally:
                conn.rollback()
        if not wait or time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def kill_heartbeat_writer(store: SqlStore) -> None:
    """``pg_terminate_backend`` of the one other backend writing the heartbeat table (the end of a
    tick, started early and not yet committed)."""
    deadline = time.monotonic() + PIPELINE_WAIT  # pipelined: the server takes the lock when the bytes arrive
    with store.engine.connect() as conn:
        while True:
            pids = conn.exec_driver_sql(
                "SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                " WHERE c.relname = 'heartbeat' AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()"
            ).all()
            conn.rollback()
            if pids or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert len(pids) == 1, pids
        conn.exec_driver_sql(f"SELECT pg_terminate_backend({int(pids[0][0])})")
        conn.rollback()
