"""The store contract (and its races) on both SQL backends: SQLite files and real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing import StoreContract, StoreRaceContract
from tests.stores.sql_support import empty_store, fast_dir, opened, pg_database, sqlite_copy, sqlite_template


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with fast_dir() as path:
        yield path


@pytest.fixture(scope="module")
def sqlite_template_file(scratch: Path) -> Iterator[Path]:
    with sqlite_template(scratch) as path:
        yield path


@pytest.fixture(scope="module")
def shared_pg_store() -> Iterator[SqlStore]:
    """ONE migrated database and store for the module; emptied before each test."""
    with pg_database() as url, opened(url) as store:
        yield store


@pytest.fixture
def sqlite_store(sqlite_template_file: Path, scratch: Path) -> Iterator[SqlStore]:
    with opened(sqlite_copy(sqlite_template_file, scratch)) as store:
        yield store


@pytest.fixture
def pg_store(shared_pg_store: SqlStore) -> SqlStore:
    empty_store(shared_pg_store)
    return shared_pg_store


@pytest.fixture(scope="module")
def shared_pg_portable_store() -> Iterator[SqlStore]:
    """The portable driver on PostgreSQL (PostgreSQL's speed off): ONE database, emptied before each test."""
    with pg_database() as url, opened(url, portable=True) as store:
        yield store


@pytest.fixture
def pg_portable_store(shared_pg_portable_store: SqlStore) -> SqlStore:
    empty_store(shared_pg_portable_store)
    return shared_pg_portable_store


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, sqlite_store: SqlStore) -> SqlStore:
        return sqlite_store


@pytest.mark.postgres
class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_store: SqlStore) -> SqlStore:
        return pg_store


@pytest.mark.postgres
class TestPostgresPortableStore(StoreContract):
    """The portable store (stores/sql, no stores/postgres driver) is correct on PostgreSQL."""

    @pytest.fixture
    def store(self, pg_portable_store: SqlStore) -> SqlStore:
        return pg_portable_store


class TestSqliteStoreRaces(StoreRaceContract):
    race_scale = 0.5

    @pytest.fixture
    def store(self, sqlite_store: SqlStore) -> SqlStore:
        return sqlite_store


@pytest.mark.postgres
class TestPostgresStoreRaces(StoreRaceContract):
    race_scale = 0.5

    @pytest.fixture
    def store(self, pg_store: SqlStore) -> SqlStore:
        return pg_store


@pytest.mark.postgres
class TestPostgresPortableStoreRaces(StoreRaceContract):
    race_scale = 0.5

    @pytest.fixture
    def store(self, pg_portable_store: SqlStore) -> SqlStore:
        return pg_portable_store
