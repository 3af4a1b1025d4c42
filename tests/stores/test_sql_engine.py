"""How the SQL store talks to its databases: SQLite in WAL with BEGIN IMMEDIATE writes; PostgreSQL
pinned to READ COMMITTED with a small pool that survives a fork; aware UTC out of both; URLs."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from alma_schedule.errors import ConfigurationError
from alma_schedule.model import Routine
from alma_schedule.stores import open_store
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.stores.sql import SqlStore, migrate_store
from alma_schedule.stores.sql.engine import normalize_url
from alma_schedule.testing.builders import SCOPE, T0, TIMERS, fire_due_long, register
from tests.stores.sql_support import fast_dir, opened, pg_database


@pytest.fixture
def sqlite_url() -> Iterator[str]:
    with fast_dir() as path:
        url = f"sqlite:///{path}/store.sqlite3"
        migrate_store(url)
        yield url


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with pg_database() as url:
        yield url


def test_sqlite_runs_in_wal_with_a_busy_timeout(sqlite_url: str) -> None:
    with opened(sqlite_url) as store, store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000


def test_sqlite_writes_take_the_write_lock_at_begin_and_reads_do_not(sqlite_url: str) -> None:
    """Inside claim_due (decide runs mid-transaction) nobody else can BEGIN IMMEDIATE; meanwhile a
    reader still reads (WAL)."""
    path = sqlite_url.removeprefix("sqlite:///")
    seen: list[str] = []
    with opened(sqlite_url) as store:
        register(store, "r1")
        reader = SqlStore(sqlite_url)

        def decide(routine: Routine) -> Any:
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
                seen.append("second writer got in")
            except sqlite3.OperationalError as exc:
                seen.append(str(exc))
            finally:
                other.close()
            got = reader.get_routine(SCOPE, "r1")
            seen.append("read" if got is not None and got.last_fire is None else "read failed")
            return fire_due_long(routine)

        try:
            assert len(store.claim_due(T0, 10, decide, TIMERS).claimed) == 1
        finally:
            reader.close()
    assert seen == ["database is locked", "read"]


def test_sqlite_datetimes_come_back_aware_utc(sqlite_url: str) -> None:
    paris = timezone(timedelta(hours=1))
    with opened(sqlite_url) as store:
        register(store, "r1", next_due_at=datetime(2026, 3, 1, 13, 0, tzinfo=paris))
        got = store.get_routine(SCOPE, "r1")
    assert got is not None and got.next_due_at == T0 and got.next_due_at.tzinfo is UTC


@pytest.mark.postgres
def test_postgres_is_read_committed_with_a_small_pool(pg_url: str) -> None:
    with opened(pg_url) as store:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW transaction_isolation").scalar() == "read committed"
            assert conn.exec_driver_sql("SHOW TimeZone").scalar() == "UTC"
        with store.engine.connect() as conn:  # single statements run in autocommit: pinned too
            conn.execution_options(isolation_level="AUTOCOMMIT")
            assert conn.exec_driver_sql("SHOW transaction_isolation").scalar() == "read committed"
            assert conn.exec_driver_sql("SHOW default_transaction_isolation").scalar() == "read committed"
        pool: Any = store.engine.pool
        assert (pool.size(), pool._max_overflow, pool._pre_ping) == (2, 2, False)  # liveness instead
        register(store, "r1")
        got = store.get_routine(SCOPE, "r1")
        assert got is not None and got.created_at is not None and got.created_at.tzinfo is UTC


def _use_after_fork(store: SqlStore, out: Any) -> None:
    store.dispose()  # forget the parent's connections without closing them
    routine = store.get_routine(SCOPE, "forked")
    out.put(routine is not None and routine.routine_id)


@pytest.mark.postgres
def test_postgres_store_works_in_a_forked_child_after_dispose(pg_url: str) -> None:
    with opened(pg_url) as store:
        register(store, "forked")
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_use_after_fork, args=(store, out))
        child.start()
        assert out.get(timeout=60) == "forked"
        child.join(30)
        assert child.exitcode == 0
        # The parent's pooled connection was not closed by the child: it still works.
        assert store.get_routine(SCOPE, "forked") is not None


def test_urls() -> None:
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"
    for bad in ("postgresql+psycopg2://u@h/db", "sqlite://", "sqlite:///:memory:", "mysql://u@h/db", "nope"):
        with pytest.raises(ConfigurationError):
            normalize_url(bad)
    with pytest.raises(ConfigurationError) as info:
        normalize_url("mysql://u:hunter2@h/db")
    assert "hunter2" not in str(info.value)


def test_open_store(sqlite_url: str) -> None:
    assert isinstance(open_store("memory://"), MemoryStore)
    store = open_store(sqlite_url)
    try:
        assert isinstance(store, SqlStore)
        assert store.list_routines(SCOPE) == []
    finally:
        store.close()


def test_sqlite_claims_a_batch_larger_than_its_variable_limit(sqlite_url: str) -> None:
    """9,000 fires in one claim_due: row-value lists would bind > 32,766 SQLite variables; the store
    chunks them (and the supersession of all 9,000 the next minute) within the one transaction."""
    import sqlalchemy as sa

    from alma_schedule.stores.sql.rows import routine_values
    from alma_schedule.stores.sql.schema import routines
    from alma_schedule.testing.builders import MINUTE, make_routine

    n = 9000
    with opened(sqlite_url) as store:

        @sa.event.listens_for(store.engine, "connect")
        def default_limit(dbapi_conn: Any, _record: Any) -> None:  # as SQLite builds by default
            dbapi_conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 32_766)

        rows = [
            routine_values(make_routine(f"r{i:05d}", created_at=T0 - MINUTE, updated_at=T0 - MINUTE)) for i in range(n)
        ]
        with store.engine.begin() as conn:
            conn.execute(sa.insert(routines), rows)
        first = store.claim_due(T0, 10_000, fire_due_long, TIMERS)
        assert len(first.claimed) == n
        second = store.claim_due(T0 + MINUTE, 10_000, fire_due_long, TIMERS)
        assert len(second.claimed) == n
        assert len(second.skipped) == n and {(r.state, r.reason) for r in second.skipped} == {("skipped", "missed")}
