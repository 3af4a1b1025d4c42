"""Fixtures of the governed-runner tests: one real store per backend (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from governed_support import SimClock


def _sql_store(url: str) -> Any:
    from alma_schedule.stores import migrate_store, open_store

    migrate_store(url)
    return open_store(url)


@pytest.fixture(params=["memory", "sqlite", "pg"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A real, empty store of each backend."""
    if request.param == "memory":
        from alma_schedule.stores.memory import MemoryStore

        yield MemoryStore()
        return
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    s = _sql_store(url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def memory_store() -> Any:
    from alma_schedule.stores.memory import MemoryStore

    return MemoryStore()


@pytest.fixture
def clock() -> SimClock:
    return SimClock()
