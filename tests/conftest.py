"""Shared fixtures: real PostgreSQL databases and Redis db numbers, created per test and cleaned up.

PostgreSQL: 127.0.0.1:5432, trust auth, user postgres (ALMA_TEST_PG_ADMIN overrides the admin URL).
Redis: 127.0.0.1:6379 (ALMA_TEST_REDIS overrides). Each test that asks for ``redis_url`` gets a db
number of its own (a lock key in db 0 hands them out across parallel processes), flushed after.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

PG_ADMIN = os.environ.get("ALMA_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_BASE = os.environ.get("ALMA_TEST_REDIS", "redis://127.0.0.1:6379")


def _pg_admin_exec(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


def make_pg_database() -> tuple[str, str]:
    """Create a fresh database; returns (name, SQLAlchemy URL)."""
    name = f"alma_test_{uuid.uuid4().hex[:12]}"
    _pg_admin_exec(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return name, f"{base}/{name}"


def drop_pg_database(name: str) -> None:
    _pg_admin_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
        for db in range(1, 16):
            if r.set(f"alma-test-db-lock:{db}", os.getpid(), nx=True, ex=1800):
                return db
    finally:
        r.close()
    raise RuntimeError("no free Redis db number for the test (1-15 all taken)")


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
