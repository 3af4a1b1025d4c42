"""Issue 52's calendars block of ``0011_calendars`` on both backends: the ``calendars`` table (as
schema.py has it) comes and goes with the revision, and a calendar written after the upgrade reads back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from alma_schedule.model.calendar import Calendar
from alma_schedule.stores.sql import migrate_store
from alma_schedule.stores.sql.schema import HEAD_REVISION, calendars
from alma_schedule.testing.builders import T0
from tests.stores.sql_support import fast_dir, opened, pg_database, table_name
from tests.stores.test_sql_migrate_0008 import _move


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        with fast_dir() as path:
            yield f"sqlite:///{Path(path)}/store.sqlite3"
    else:
        with pg_database(migrated=False) as pg:
            yield pg


def _calendar_columns(url: str) -> list[str] | None:
    engine = sa.create_engine(url)
    try:
        schema = "alma" if url.startswith("postgresql") else None
        name = table_name(url, "calendars").split(".")[-1]
        if not sa.inspect(engine).has_table(name, schema):
            return None
        return [c["name"] for c in sa.inspect(engine).get_columns(name, schema)]
    finally:
        engine.dispose()


def test_the_calendars_table_comes_and_goes_with_the_revision(url: str) -> None:
    assert migrate_store(url) == HEAD_REVISION
    assert _calendar_columns(url) == [c.name for c in calendars.columns]
    _move(url, "0010_history")
    assert _calendar_columns(url) is None
    assert migrate_store(url) == HEAD_REVISION
    with opened(url) as store:
        stored = store.put_calendar(Calendar("us", "US", 2027, 2027, (("2027-07-05", "Independence Day"),)), now=T0)
        assert store.get_calendar("us") == stored and stored.version == 1
