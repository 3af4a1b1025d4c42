"""Migrations: the migrated schema IS the declared metadata; migrating is idempotent and safe from
two processes at once; an unmigrated store is refused with SchemaMismatch; the CLI command."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from click.testing import CliRunner

from alma_schedule.cli import cli
from alma_schedule.errors import SchemaMismatch, StoreError
from alma_schedule.stores.sql import SqlStore, migrate_store
from alma_schedule.stores.sql.engine import check_sqlite_version, make_engine
from alma_schedule.stores.sql.migrate import head_revision
from alma_schedule.stores.sql.schema import HEAD_REVISION, metadata
from alma_schedule.testing.builders import SCOPE, register
from tests.stores.sql_support import (
    fast_dir,
    index_ddl,
    libpq_url,
    namespaced_metadata,
    opened,
    pg_database,
    table_name,
)


@pytest.fixture
def scratch() -> Iterator[Path]:
    with fast_dir() as path:
        yield path


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, scratch: Path) -> Iterator[str]:
    """A reachable database with no tables, on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{scratch}/store.sqlite3"
    else:
        with pg_database(migrated=False) as url:
            yield url


def _diffs(url: str, schema: str = "alma") -> list[Any]:
    """Alembic's comparison of the store's namespace with the declared metadata (under its real names)."""
    real = namespaced_metadata(url, schema)
    ours = {t.name for t in real.sorted_tables}
    postgres = url.startswith("postgresql")

    def include(name: str | None, type_: str, parent: Any) -> bool:
        if type_ == "schema":
            return name == schema if postgres else True
        return type_ != "table" or name in ours

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            opts = {
                "compare_type": True,
                "target_metadata": real,
                "include_schemas": postgres,
                "include_name": include,
            }
            ctx = MigrationContext.configure(conn, opts=opts)
            return list(compare_metadata(ctx, real))
    finally:
        engine.dispose()


def _declared(url: str) -> None:
    """``create_all`` of the declared metadata into an empty database, through our engine."""
    engine = make_engine(url)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("CREATE SCHEMA alma")
        metadata.create_all(conn, checkfirst=False)
    engine.dispose()


def test_the_code_expects_the_head_revision() -> None:
    assert head_revision() == HEAD_REVISION


def test_migrated_schema_equals_the_declared_metadata(empty_url: str, scratch: Path) -> None:
    assert migrate_store(empty_url) == HEAD_REVISION
    assert _diffs(empty_url) == []
    # Alembic does not compare partial-index predicates: compare the DDL with create_all's.
    if empty_url.startswith("sqlite"):
        declared_url = f"sqlite:///{scratch}/declared.sqlite3"
        _declared(declared_url)
        migrated = index_ddl(empty_url)
        assert migrated == index_ddl(declared_url)
        assert "ON alma_runs (resend_at) WHERE state = 'claimed'" in migrated["alma_ix_runs_resend"]
        return
    with pg_database(migrated=False) as declared_url:
        _declared(declared_url)
        migrated = index_ddl(empty_url)
        assert migrated == index_ddl(declared_url)
        assert "WHERE ((state)::text = 'claimed'::text)" in migrated["ix_runs_resend"]
        assert "ON alma.runs" in migrated["ix_runs_resend"]


def test_a_changed_schema_is_detected(empty_url: str) -> None:
    """The comparison can fail: drop an index and a column, and the diff says so."""
    migrate_store(empty_url)
    engine = sa.create_engine(empty_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP INDEX {table_name(empty_url, 'ix_runs_poll')}")
        conn.exec_driver_sql(f"ALTER TABLE {table_name(empty_url, 'runs')} DROP COLUMN turn_id")
    engine.dispose()
    kinds = {d[0] if isinstance(d, tuple) else d[0][0] for d in _diffs(empty_url)}
    assert {"add_index", "add_column"} <= kinds


def test_migrating_twice_changes_nothing(empty_url: str) -> None:
    migrate_store(empty_url)
    with opened(empty_url) as store:
        register(store, "r1")
    assert migrate_store(empty_url) == HEAD_REVISION
    with opened(empty_url) as store:
        assert [r.routine_id for r in store.list_routines(SCOPE)] == ["r1"]


def _migrate_in_child(url: str, barrier: Any, out: Any) -> None:
    barrier.wait(timeout=60)
    try:
        out.put(("ok", migrate_store(url)))
    except Exception as exc:  # reported to the parent
        out.put(("error", repr(exc)))


@pytest.mark.integration  # subprocesses
def test_two_processes_migrating_at_once_both_succeed(empty_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_migrate_in_child, args=(empty_url, barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert results == [("ok", HEAD_REVISION)] * 2
    assert _diffs(empty_url) == []


@pytest.mark.postgres
def test_postgres_migrations_wait_for_the_advisory_lock() -> None:
    """While another session holds the migration lock, migrate_store waits (polling) and writes nothing."""
    from alma_schedule.stores.sql.queries import MIGRATION_LOCK_KEY

    tries: list[float] = []

    def seen(_c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
        if "pg_try_advisory_lock" in statement:  # the migrator's thread, in this process
            tries.append(time.monotonic())

    with pg_database(migrated=False) as url, psycopg.connect(libpq_url(url), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        done = threading.Event()
        thread = threading.Thread(target=lambda: (migrate_store(url), done.set()))
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", seen)
        thread.start()
        try:
            # the migrator polls pg_try_advisory_lock (it never waits inside a statement: a waiting
            # statement holds a snapshot a CREATE INDEX CONCURRENTLY would wait for); each try is
            # seen as it is sent (the session's last statement in pg_stat_activity is the COMMIT
            # after it, so a poll of pg_stat_activity sees the try only by luck)
            deadline = time.monotonic() + 60
            while len(tries) < 2:  # until the migrator has tried the lock, been refused and tried again
                assert not done.is_set(), "migrate_store finished while another session held the lock"
                assert time.monotonic() < deadline, "the migrator never tried the advisory lock"
                done.wait(0.05)
            before = len(tries)
            done.wait(1.0)  # several more tries, all refused
            assert not done.is_set() and len(tries) > before
            tables = holder.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'routines'").fetchone()
            assert holder.execute("SELECT to_regnamespace('alma')").fetchone() == (None,)
            assert tables == (0,)
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
            thread.join(timeout=60)
            sa.event.remove(sa.engine.Engine, "before_cursor_execute", seen)
        assert done.is_set()
        assert _diffs(url) == []


def test_an_unmigrated_store_is_refused_with_schema_mismatch(empty_url: str) -> None:
    with opened(empty_url) as store, pytest.raises(SchemaMismatch, match="alma-schedule migrate"):
        store.get_routine(SCOPE, "r1")


def test_a_store_at_another_revision_is_refused(empty_url: str) -> None:
    migrate_store(empty_url)
    engine = sa.create_engine(empty_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE {table_name(empty_url, 'schedule_version')} SET version_num = '0000_other'")
    engine.dispose()
    with opened(empty_url) as store, pytest.raises(SchemaMismatch, match="0000_other"):
        store.list_routines(SCOPE)


def test_sqlite_without_returning_is_refused() -> None:
    with pytest.raises(StoreError, match=r"3\.34\.1 is too old.*3\.35"):
        check_sqlite_version((3, 34, 1))
    check_sqlite_version((3, 35, 0))


def test_cli_migrate(empty_url: str) -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["migrate", "--database-url", empty_url])
    assert first.exit_code == 0, first.output
    assert HEAD_REVISION in first.output
    again = runner.invoke(cli, ["--database-url", empty_url, "migrate", "--json"])
    assert again.exit_code == 0, again.output
    assert f'"revision": "{HEAD_REVISION}"' in again.output
    store = SqlStore(empty_url)
    try:
        assert store.list_routines(SCOPE) == []
    finally:
        store.close()


def test_cli_migrate_unreachable_database_is_one_line_without_the_password() -> None:
    url = "postgresql+psycopg://alma:hunter2@127.0.0.1:9/alma"
    result = CliRunner().invoke(cli, ["migrate", "--database-url", url])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "hunter2" not in result.output
    assert "postgresql+psycopg://alma:***@127.0.0.1:9/alma" in lines[0]
    assert lines[0].startswith("error: ")
