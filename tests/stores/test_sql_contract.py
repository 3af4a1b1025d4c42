"""The store contract (and its races) on both SQL backends: SQLite files and real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing import StoreContract, StoreRaceContract
from tests.stores.sql_support import empty_pg, opened, pg_database, sqlite_copy, sqlite_template


@pytest.fixture(scope="module")
def sqlite_template_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with sqlite_template(tmp_path_factory.mktemp("sqlite-template")) as path:
        yield path


@pytest.fixture(scope="module")
def shared_pg() -> Iterator[str]:
    with pg_database() as url:
        yield url


@pytest.fixture
def sqlite_store(sqlite_template_file: Path, tmp_path: Path) -> Iterator[SqlStore]:
    with opened(sqlite_copy(sqlite_template_file, tmp_path)) as store:
        yield store


@pytest.fixture
def pg_store(shared_pg: str) -> Iterator[SqlStore]:
    empty_pg(shared_pg)
    with opened(shared_pg) as store:
        yield store


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, sqlite_store: SqlStore) -> SqlStore:
        return sqlite_store


@pytest.mark.postgres
class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_store: SqlStore) -> SqlStore:
        return pg_store


class TestSqliteStoreRaces(StoreRaceContract):
    race_scale = 0.3

    @pytest.fixture
    def store(self, sqlite_store: SqlStore) -> SqlStore:
        return sqlite_store


@pytest.mark.postgres
class TestPostgresStoreRaces(StoreRaceContract):
    race_scale = 0.3

    @pytest.fixture
    def store(self, pg_store: SqlStore) -> SqlStore:
        return pg_store
