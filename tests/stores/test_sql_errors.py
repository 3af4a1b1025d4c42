"""Every driver error the boundary maps lands on one of our typed errors, ``from`` the original; a
connection killed in the middle of ``claim_due`` leaves nothing half-written."""

from __future__ import annotations

import re
import socket
import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
import sqlalchemy.exc as sa_exc

from alma_schedule.errors import (
    InvalidInput,
    SchemaMismatch,
    StoreConflict,
    StoreError,
    StoreUnavailable,
)
from alma_schedule.model import Routine, RunKey
from alma_schedule.stores.sql import SqlStore, migrate_store
from alma_schedule.stores.sql.errors import mapped_errors
from alma_schedule.stores.sql.schema import runs
from alma_schedule.testing.builders import SCOPE, T0, TIMERS, fire_due_long, register, run_in
from tests.stores.sql_support import fast_dir, libpq_url, opened, pg_database, table_name

#: The statement that moves the cursors: on PostgreSQL the supersede's, whose CTE does it.
_CURSOR_UPDATE = re.compile(r"UPDATE alma[._]routines SET last_fire")

PASSWORD = "hunter2-secret"


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:  # one migrated database for the module
    with pg_database() as url:
        yield url


@pytest.fixture
def sqlite_url() -> Iterator[str]:
    with fast_dir() as path:
        url = f"sqlite:///{path}/store.sqlite3"
        migrate_store(url)
        yield url


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _raises(kind: type[Exception], url: str, action: Any) -> Exception:
    """Run ``action`` behind the boundary; it must raise exactly ``kind``, chained to a driver error."""
    with pytest.raises(StoreError) as info, mapped_errors(url):
        action()
    assert type(info.value) is kind, f"{info.value!r} is not a {kind.__name__}"
    assert isinstance(info.value.__cause__, (sa_exc.SQLAlchemyError, OSError))
    assert PASSWORD not in str(info.value)
    return info.value


# ------------------------------------------------------------------------------ unavailable


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "postgresql"])
def test_connection_refused_names_the_url_without_its_password(scheme: str) -> None:
    port = _closed_port()
    url = f"{scheme}://alma:{PASSWORD}@127.0.0.1:{port}/alma"
    store = SqlStore(url)
    try:
        with pytest.raises(StoreUnavailable) as info:
            store.get_routine(SCOPE, "r1")
    finally:
        store.close()
    message = str(info.value)
    assert f"postgresql+psycopg://alma:***@127.0.0.1:{port}/alma" in message
    assert PASSWORD not in message and "\n" not in message
    assert isinstance(info.value.__cause__, sa_exc.OperationalError)
    with pytest.raises(StoreUnavailable, match=r"alma:\*\*\*@"):
        migrate_store(url)


def test_an_unopenable_sqlite_file_is_unavailable() -> None:
    with opened("sqlite:////nonexistent-dir/alma.sqlite3") as store, pytest.raises(StoreUnavailable):
        store.list_routines(SCOPE)


def test_a_locked_sqlite_database_is_unavailable(sqlite_url: str) -> None:
    path = sqlite_url.removeprefix("sqlite:///")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    engine = sa.create_engine(sqlite_url, connect_args={"timeout": 0.05})
    try:

        def write() -> None:
            with engine.connect() as conn:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        _raises(StoreUnavailable, sqlite_url, write)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        engine.dispose()


@pytest.mark.postgres
def test_an_exhausted_pool_is_unavailable(pg_url: str) -> None:
    engine = sa.create_engine(pg_url, pool_size=1, max_overflow=0, pool_timeout=0.1)
    try:
        with engine.connect():
            _raises(StoreUnavailable, pg_url, lambda: engine.connect())
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_cancelled_statement_is_unavailable(pg_url: str) -> None:
    engine = sa.create_engine(pg_url)
    try:

        def slow() -> None:
            with engine.begin() as conn:
                conn.exec_driver_sql("SET LOCAL statement_timeout = 10")
                conn.exec_driver_sql("SELECT pg_sleep(5)")

        _raises(StoreUnavailable, pg_url, slow)
    finally:
        engine.dispose()


# ------------------------------------------------------------------------------ conflicts


def _engine_for(url: str) -> sa.Engine:
    return sa.create_engine(url)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_constraint_violations_are_conflicts(backend: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    with opened(url) as store:
        store.claim_due(T0, 10, fire_due_long, TIMERS)  # nothing due: warms the schema check
        run = run_in(store, "running", f"conflict-{backend}")
    engine = _engine_for(url)
    version_cols = "org, uid, routine_id, version, config_revision, kind, schedule, definition, created_at"
    versions, runs_t, routines_t = (table_name(url, t) for t in ("routine_versions", "runs", "routines"))
    dup_key = f"INSERT INTO {versions} ({version_cols}) SELECT {version_cols} FROM {versions}"
    run_cols = [c.name for c in runs.c]
    copied = ", ".join("'another'" if c == "run_id" else c for c in run_cols)
    second_open_run = f"INSERT INTO {runs_t} SELECT {copied} FROM {runs_t} WHERE run_id = '{run.run_id}'"
    bad_state = f"UPDATE {runs_t} SET state = 'exploded' WHERE run_id = '{run.run_id}'"
    null_kind = f"UPDATE {routines_t} SET kind = NULL"
    try:
        for sql in (dup_key, second_open_run, bad_state, null_kind):

            def execute(sql: str = sql) -> None:
                with engine.begin() as conn:
                    conn.exec_driver_sql(sql)

            err = _raises(StoreConflict, url, execute)
            assert isinstance(err.__cause__, sa_exc.IntegrityError)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_deadlock_is_a_conflict(pg_url: str) -> None:
    with opened(pg_url) as store:
        register(store, "dl-a")
        register(store, "dl-b")
    engine = sa.create_engine(pg_url, pool_size=2)
    first_locked = [threading.Event(), threading.Event()]
    errors: list[BaseException] = []

    def locker(i: int) -> None:
        order = ["dl-a", "dl-b"] if i == 0 else ["dl-b", "dl-a"]
        try:
            with mapped_errors(pg_url), engine.begin() as conn:
                conn.exec_driver_sql("SET LOCAL deadlock_timeout = '50ms'")
                conn.exec_driver_sql(f"SELECT 1 FROM alma.routines WHERE routine_id = '{order[0]}' FOR UPDATE")
                first_locked[i].set()
                first_locked[1 - i].wait(10)
                conn.exec_driver_sql(f"SELECT 1 FROM alma.routines WHERE routine_id = '{order[1]}' FOR UPDATE")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=locker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    engine.dispose()
    assert len(errors) == 1 and type(errors[0]) is StoreConflict, errors
    cause = errors[0].__cause__
    assert isinstance(cause, sa_exc.DBAPIError) and isinstance(cause.orig, psycopg.errors.DeadlockDetected)


@pytest.mark.postgres
def test_lock_not_available_is_a_conflict(pg_url: str) -> None:
    with opened(pg_url) as store:
        register(store, "nowait")
    engine = sa.create_engine(pg_url, pool_size=2)
    try:
        with engine.begin() as holder:
            holder.exec_driver_sql("SELECT 1 FROM alma.routines WHERE routine_id = 'nowait' FOR UPDATE")

            def grab() -> None:
                with engine.begin() as conn:
                    conn.exec_driver_sql("SELECT 1 FROM alma.routines WHERE routine_id = 'nowait' FOR UPDATE NOWAIT")

            _raises(StoreConflict, pg_url, grab)
    finally:
        engine.dispose()


# ------------------------------------------------------------------------------ schema and bugs


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_a_missing_table_is_a_schema_mismatch(backend: str) -> None:
    with fast_dir() as path:
        url = f"sqlite:///{path}/s.sqlite3"
        ctx = pg_database() if backend == "postgresql" else None
        if ctx is not None:
            url = ctx.__enter__()
        try:
            migrate_store(url)
            engine = sa.create_engine(url)
            with engine.begin() as conn:
                conn.exec_driver_sql(f"DROP TABLE {table_name(url, 'runs')}")
            engine.dispose()
            with opened(url) as store, pytest.raises(SchemaMismatch, match="not migrated") as info:
                store.get(RunKey.of(SCOPE, "r1", "x"))
            assert isinstance(info.value.__cause__, sa_exc.SQLAlchemyError)
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_any_other_driver_error_is_a_plain_store_error(backend: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    engine = sa.create_engine(url)
    try:

        def broken() -> None:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELEC 1")

        _raises(StoreError, url, broken)
    finally:
        engine.dispose()


def test_a_naive_datetime_is_invalid_input_not_a_store_error(sqlite_url: str) -> None:
    with opened(sqlite_url) as store, pytest.raises(InvalidInput, match="aware"):
        store.claim_due(T0.replace(tzinfo=None), 10, fire_due_long, TIMERS)


# ------------------------------------------------------------------------------ killed mid-transaction


def _terminate(pg_url: str, pid: int) -> None:
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as admin:  # ANOTHER connection
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.mark.postgres
@pytest.mark.parametrize("when", ["in_decide", "after_the_cursor_update"])
def test_a_connection_killed_inside_claim_due_leaves_nothing_half_written(pg_url: str, when: str) -> None:
    with opened(pg_url) as store:
        prefix = f"kill-{when}-"
        for i in range(5):
            register(store, f"{prefix}{i}")
        mine = lambda: {r.routine_id: r for r in store.iter_routines() if r.routine_id.startswith(prefix)}  # noqa: E731
        before = mine()
        killed: list[int] = []

        def decide(routine: Routine) -> Any:
            if when == "in_decide" and not killed:
                with psycopg.connect(libpq_url(pg_url), autocommit=True) as admin:
                    row = admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                        "AND application_name = 'alma-schedule' AND state = 'idle in transaction'"
                    ).fetchone()
                assert row is not None, "the claimer's transaction is not open"
                _terminate(pg_url, row[0])
                killed.append(row[0])
            return fire_due_long(routine)

        def after(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
            if when == "after_the_cursor_update" and not killed and _CURSOR_UPDATE.search(statement):
                driver = conn.connection.dbapi_connection
                moved = driver.execute(  # in the claim's own transaction: the cursors moved, uncommitted
                    "SELECT count(*) FROM alma.routines WHERE routine_id LIKE %s AND last_fire IS NOT NULL",
                    (f"{prefix}%",),
                ).fetchone()
                assert moved == (5,)
                pid = driver.info.backend_pid
                _terminate(pg_url, pid)
                killed.append(pid)

        sa.event.listen(store.engine, "after_cursor_execute", after)
        try:
            with pytest.raises(StoreUnavailable) as info:
                store.claim_due(T0, 100, decide, TIMERS)
        finally:
            sa.event.remove(store.engine, "after_cursor_execute", after)
        assert killed and "unavailable" in str(info.value)
        assert mine() == before, "a cursor moved without its run row"
        assert [r for r in store.list_runs(SCOPE, limit=1000) if r.routine_id.startswith(prefix)] == []
        # The store recovers (the dead connection is dropped from the pool) and claims them once.
        batch = store.claim_due(T0, 100, fire_due_long, TIMERS)
        assert sorted(r.routine_id for r in batch.claimed if r.routine_id.startswith(prefix)) == sorted(before)
        assert all(r.last_fire == T0 and r.next_due_at == T0 + timedelta(minutes=1) for r in mine().values())


def _claim_and_die(url: str) -> None:
    """Child process: claim_due, and die (os._exit) right after the cursor UPDATE ran."""
    import os

    store = SqlStore(url)

    def after(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if _CURSOR_UPDATE.match(statement):
            os._exit(17)

    sa.event.listen(store.engine, "after_cursor_execute", after)
    store.claim_due(T0, 100, fire_due_long, TIMERS)
    os._exit(0)


def test_a_sqlite_process_killed_inside_claim_due_leaves_nothing_half_written(sqlite_url: str) -> None:
    import multiprocessing

    with opened(sqlite_url) as store:
        for i in range(3):
            register(store, f"k{i}")
        before = list(store.iter_routines())
        child = multiprocessing.get_context("spawn").Process(target=_claim_and_die, args=(sqlite_url,))
        child.start()
        child.join(60)
        assert child.exitcode == 17, "the child did not die mid-transaction"
        assert list(store.iter_routines()) == before
        assert store.list_runs(SCOPE) == []
        assert len(store.claim_due(T0, 100, fire_due_long, TIMERS).claimed) == 3  # the lock was released
