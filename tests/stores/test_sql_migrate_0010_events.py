"""Issue 50's audit trail in revision ``0010_history`` on both backends: the ``routine_events``
table and its two indexes are created (a re-run is harmless), dropped by the downgrade, and a store
at head appends and reads events after the round trip."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from alma_schedule.stores.sql import migrate_store
from alma_schedule.stores.sql.schema import HEAD_REVISION
from alma_schedule.testing.builders import SCOPE, T0, register
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


def _shape(url: str) -> tuple[list[str], set[str]] | None:
    """The columns and index names of routine_events, or None when the table does not exist."""
    engine = sa.create_engine(url)
    try:
        schema = "alma" if url.startswith("postgresql") else None
        name = table_name(url, "routine_events").split(".")[-1]
        inspector = sa.inspect(engine)
        if not inspector.has_table(name, schema):
            return None
        columns = [c["name"] for c in inspector.get_columns(name, schema)]
        return columns, {i["name"] for i in inspector.get_indexes(name, schema) if i["name"] is not None}
    finally:
        engine.dispose()


def test_the_table_is_created_dropped_and_created_again(url: str) -> None:
    assert migrate_store(url) == HEAD_REVISION
    shape = _shape(url)
    assert shape is not None
    columns, indexes = shape
    assert columns == ["event_id", "org", "uid", "routine_id", "at", "actor", "action", "reason", "diff"]
    for index in ("ix_routine_events_routine", "ix_routine_events_at"):  # SQLite's names carry the prefix
        assert any(name == index or name.endswith("_" + index) for name in indexes)
    with opened(url) as store:
        register(store, "old")
        store.set_paused(SCOPE, "old", "manual", now=T0, next_due_at=None, actor="alice@host")
    _move(url, "0009_adoption")
    assert _shape(url) is None
    assert migrate_store(url) == HEAD_REVISION
    with opened(url) as store:
        assert store.routine_events(SCOPE, "old") == []  # the downgrade dropped the old rows with the table
        store.set_paused(SCOPE, "old", None, now=T0, next_due_at=None, actor="bob@host")
        (event,) = store.routine_events(SCOPE, "old")
        assert (event.action, event.actor, event.diff) == (
            "resume",
            "bob@host",
            {"paused_reason": {"before": "manual", "after": None}},
        )
