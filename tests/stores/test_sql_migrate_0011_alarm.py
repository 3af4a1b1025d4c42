"""Issue 52's did-not-run alarm block of ``0011_calendars`` on both backends: ``overdue_alerts`` (as
schema.py has it) and the partial index ``ix_routines_expect`` come and go with the revision; the
index serves the overdue read (SQLite's plan names it); a routine stored before reads as overdue after."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from alma_schedule.stores.sql import migrate_store
from alma_schedule.stores.sql.queries.overdue import expect_routines
from alma_schedule.stores.sql.schema import HEAD_REVISION, overdue_alerts
from alma_schedule.testing.builders import T0, register
from tests.stores.sql_support import fast_dir, opened, pg_database, table_name
from tests.stores.test_sql_migrate_0008 import _move

EXPECT = {"every": 60, "expect": "30s"}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        with fast_dir() as path:
            yield f"sqlite:///{Path(path)}/store.sqlite3"
    else:
        with pg_database(migrated=False) as pg:
            yield pg


def _shape(url: str) -> tuple[list[str] | None, bool]:
    """The alerts table's columns (None: absent) and whether the routines index exists."""
    engine = sa.create_engine(url)
    try:
        schema = "alma" if url.startswith("postgresql") else None
        inspector = sa.inspect(engine)
        name = table_name(url, "overdue_alerts").split(".")[-1]
        present = inspector.has_table(name, schema)
        columns = [c["name"] for c in inspector.get_columns(name, schema)] if present else None
        routines = table_name(url, "routines").split(".")[-1]
        indexed = any(str(i["name"]).endswith("ix_routines_expect") for i in inspector.get_indexes(routines, schema))
        return columns, indexed
    finally:
        engine.dispose()


def test_the_alerts_table_and_the_expect_index_come_and_go_with_the_revision(url: str) -> None:
    assert migrate_store(url) == HEAD_REVISION
    assert _shape(url) == ([c.name for c in overdue_alerts.columns], True)
    with opened(url) as store:
        register(store, "watched", next_due_at=T0, schedule=EXPECT)
    _move(url, "0010_history")
    assert _shape(url) == (None, False)
    assert migrate_store(url) == HEAD_REVISION
    with opened(url) as store:
        [fire] = store.overdue(T0 + timedelta(minutes=1))
        assert fire.routine_id == "watched"
        assert store.take_alerts([fire], now=T0, lease_until=T0 + timedelta(minutes=5)) == [fire]


def test_sqlite_reads_the_routines_with_expect_through_the_partial_index() -> None:
    with fast_dir() as path:
        url = f"sqlite:///{Path(path)}/store.sqlite3"
        migrate_store(url)
        with opened(url) as store:
            stmt = expect_routines("sqlite", None, 200)
            with store.engine.connect() as conn:
                compiled = stmt.compile(conn, compile_kwargs={"literal_binds": True})
                plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}"))
        assert "ix_routines_expect" in plan, plan
