"""Fixtures of the governed-runner tests: one real, EMPTY store per backend (memory, SQLite, PostgreSQL).

Creating and migrating a database per test would dominate the run time, so the PostgreSQL backend
migrates ONE database per test session and empties its tables before each test; SQLite copies a
migrated template file.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from governed_support import T0, empty_tables

from alma_schedule.model.time import SettableTime

PG_ADMIN = os.environ.get("ALMA_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture(scope="session")
def governed_pg_url() -> Iterator[str]:
    """One migrated PostgreSQL database for the session (dropped afterwards)."""
    from alma_schedule.stores import migrate_store

    name = f"alma_test_gov_{uuid.uuid4().hex[:12]}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1) + f"/{name}"
    try:
        migrate_store(url)
        yield url
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from alma_schedule.stores import migrate_store

    path = tmp_path_factory.mktemp("governed") / "template.sqlite3"
    migrate_store(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["memory", "sqlite", "pg"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A real, empty store of each backend."""
    if request.param == "memory":
        from alma_schedule.stores.memory import MemoryStore

        yield MemoryStore()
        return
    from alma_schedule.stores import open_store

    if request.param == "sqlite":
        target = tmp_path / f"store-{uuid.uuid4().hex[:8]}.sqlite3"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), target)
        url = f"sqlite:///{target}"
    else:
        url = request.getfixturevalue("governed_pg_url")
        empty_tables(url)
    s = open_store(url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def clock() -> SettableTime:
    return SettableTime(T0)
