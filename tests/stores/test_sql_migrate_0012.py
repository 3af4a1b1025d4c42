"""Issue 51's ``0012_ledger_key`` on both backends: the scope ledger's index carries its whole paging
key ``(org, uid, fire_at, run_id, routine_id)`` and replaces ``ix_runs_scope_fire``; down and up again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from alma_schedule.stores.sql import migrate_store
from alma_schedule.stores.sql.schema import HEAD_REVISION
from tests.stores.sql_support import fast_dir, pg_database, table_name
from tests.stores.test_sql_migrate_0008 import _move


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        with fast_dir() as path:
            yield f"sqlite:///{Path(path)}/store.sqlite3"
    else:
        with pg_database(migrated=False) as pg:
            yield pg


def _ledger_indexes(url: str) -> dict[str, list[str]]:
    engine = sa.create_engine(url)
    try:
        schema = "alma" if url.startswith("postgresql") else None
        name = table_name(url, "runs").split(".")[-1]
        found = sa.inspect(engine).get_indexes(name, schema)
        return {
            str(i["name"]).rsplit("ix_runs_scope_", 1)[-1]: [str(c) for c in i["column_names"]]
            for i in found
            if "ix_runs_scope_" in str(i["name"])
        }
    finally:
        engine.dispose()


def test_the_ledger_index_holds_the_whole_paging_key_and_replaces_the_old_one(url: str) -> None:
    assert HEAD_REVISION == "0012_ledger_key"
    assert migrate_store(url) == HEAD_REVISION
    assert _ledger_indexes(url) == {"key": ["org", "uid", "fire_at", "run_id", "routine_id"]}
    _move(url, "0011_calendars")
    assert _ledger_indexes(url) == {"fire": ["org", "uid", "fire_at", "run_id"]}
    assert migrate_store(url) == HEAD_REVISION
    assert _ledger_indexes(url) == {"key": ["org", "uid", "fire_at", "run_id", "routine_id"]}
