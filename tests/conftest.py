"""Shared fixtures: real PostgreSQL databases and Redis db numbers, created per test and cleaned up;
and the test tiers.

PostgreSQL: 127.0.0.1:5432, trust auth, user postgres (ALMA_TEST_PG_ADMIN overrides the admin URL).
A migrated database is a CLONE of a template migrated once per run (``CREATE DATABASE ... TEMPLATE``,
:func:`migrated_pg_database`): the template's name carries a hash of the migrations and the declared
schema, it is created under an advisory lock (parallel workers make it once), takes no connections,
and the run's last process drops it. Redis: 127.0.0.1:6379 (ALMA_TEST_REDIS overrides). Each test
that asks for ``redis_url`` gets a db number of its own (a lock key in db 0 hands them out across
parallel processes), flushed after.

Tiers (markers, set here from what a test uses; README "Tests" names the commands): ``unit`` (no
server), ``contract`` (the store contract suite on every backend), ``integration`` (real PostgreSQL
or Redis, or a subprocess), ``slow`` (real time: real workers, real clocks) and ``chaos``. A test
marked ``slow`` or ``chaos`` keeps that tier; every other test gets exactly one of the first three.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_support import (
    PG_ADMIN as PG_ADMIN,
)
from tests.pg_support import (
    drop_pg_database,
    drop_pg_templates,
    make_pg_database,
    migrated_pg_database,
)

REDIS_BASE = os.environ.get("ALMA_TEST_REDIS", "redis://127.0.0.1:6379")


@pytest.fixture
def migrated_pg_url() -> Iterator[str]:
    """A SQLAlchemy URL of a new PostgreSQL database already at the migrations' head (dropped afterwards)."""
    with migrated_pg_database() as url:
        yield url


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from alma_schedule.stores import migrate_store

    path = tmp_path_factory.mktemp("sqlite-template") / "template.sqlite3"
    migrate_store(f"sqlite:///{path}")
    return path


@pytest.fixture
def migrated_sqlite_url(_sqlite_template: Path, tmp_path: Path) -> str:
    """A SQLAlchemy URL of a new SQLite file at the migrations' head (a copy of a migrated template)."""
    import shutil

    target = tmp_path / "alma.sqlite3"
    shutil.copyfile(_sqlite_template, target)
    return f"sqlite:///{target}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A SQLAlchemy URL of a new, empty PostgreSQL database (dropped afterwards)."""
    name, url = make_pg_database()
    try:
        yield url
    finally:
        drop_pg_database(name)


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    """A SQLAlchemy URL of a new SQLite file in the test's tmp dir."""
    return f"sqlite:///{tmp_path}/alma.sqlite3"


def _claim_redis_db() -> int:
    import redis

    r = redis.Redis.from_url(f"{REDIS_BASE}/0")
    try:
        for db in range(1, 15):  # 15 is the scratch number of tests that name a broker but assert nothing in it
            if r.set(f"alma-test-db-lock:{db}", os.getpid(), nx=True, ex=1800):
                return db
    finally:
        r.close()
    raise RuntimeError("no free Redis db number for the test (1-14 all taken)")


def _release_redis_db(db: int) -> None:
    import redis

    r = redis.Redis.from_url(f"{REDIS_BASE}/{db}")
    try:
        r.flushdb()
    finally:
        r.close()
    r0 = redis.Redis.from_url(f"{REDIS_BASE}/0")
    try:
        r0.delete(f"alma-test-db-lock:{db}")
    finally:
        r0.close()


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A redis:// URL of a db number this test owns (flushed before and after)."""
    db = _claim_redis_db()
    import redis

    r = redis.Redis.from_url(f"{REDIS_BASE}/{db}")
    r.flushdb()
    r.close()
    try:
        yield f"{REDIS_BASE}/{db}"
    finally:
        _release_redis_db(db)


# ------------------------------------------------------------------------------------------ tiers

#: Fixtures that reach a server (PostgreSQL, Redis) or a subprocess of ours.
SERVER_FIXTURES = frozenset(
    {"pg_url", "migrated_pg_url", "redis_url", "redis_client", "governed_pg_url", "e2e", "procs", "worker", "own_redis"}
)
#: The files of the store contract suite (every backend).
CONTRACT_FILES = frozenset({"test_sql_contract.py", "test_memory_contract.py", "test_contract_bites.py"})
#: Files whose tests reach a server (or a browser) through helpers rather than fixtures (found by
#: running ``pytest -m unit`` with both servers away, and by its durations).
SERVER_FILES = frozenset(
    {
        "test_sql_blocked_read.py",
        "test_sql_insert_ahead.py",
        "test_dashboard_browser.py",  # a real Chromium
        "test_cli_one_line_errors.py",  # unreachable and 0.1.0 stores, every command
    }
)
TIERS = ("unit", "contract", "integration", "slow", "chaos")


def _needs_server(item: pytest.Item) -> bool:
    if item.get_closest_marker("postgres") or item.get_closest_marker("redis"):
        return True
    if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(v in ("pg", "postgresql", "postgres") for v in callspec.params.values()):
        return True
    return Path(str(item.fspath)).name in SERVER_FILES


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    selected_sweep = "sweep" in (config.getoption("markexpr") or "")
    for item in items:
        if item.get_closest_marker("sweep") and not selected_sweep:  # hours: only when asked for
            item.add_marker(pytest.mark.skip(reason="the full ten-year solar sweep: run `pytest -m sweep -n auto`"))
        if item.get_closest_marker("slow") or item.get_closest_marker("chaos"):
            continue
        if Path(str(item.fspath)).name in CONTRACT_FILES:
            item.add_marker(pytest.mark.contract)
        elif _needs_server(item) or item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.integration)
        else:
            item.add_marker(pytest.mark.unit)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        drop_pg_templates()
