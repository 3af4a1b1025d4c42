"""Issue 47's revision (``0009_adoption``) on both backends: ``routines.source``, ``source_entry`` and
``disabled_reason`` come last and nullable; rows from before read as unrecorded; the block round-trips."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from alma_schedule.model import Routine
from alma_schedule.model.provenance import REMOVED_FROM_BEAT
from alma_schedule.stores.sql import migrate_store
from alma_schedule.stores.sql.schema import HEAD_REVISION
from alma_schedule.testing.builders import SCOPE, T0, register
from tests.stores.sql_support import fast_dir, opened, pg_database
from tests.stores.test_sql_migrate_0008 import _columns, _move

ROUTINE_FIELDS = [f.name for f in dataclasses.fields(Routine)]
NEW = ["source", "source_entry", "disabled_reason"]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        with fast_dir() as path:
            yield f"sqlite:///{Path(path)}/store.sqlite3"
    else:
        with pg_database(migrated=False) as pg:
            yield pg


def test_the_columns_come_last_and_rows_from_before_read_as_unrecorded(url: str) -> None:
    assert migrate_store(url) == HEAD_REVISION
    assert _columns(url) == ROUTINE_FIELDS and _columns(url)[-3:] == NEW
    with opened(url) as store:
        register(store, "old")
    _move(url, "0008_hardening")
    assert not set(NEW) & set(_columns(url))
    assert migrate_store(url) == HEAD_REVISION
    with opened(url) as store:
        row = store.get_routine(SCOPE, "old")
        assert row is not None and (row.source, row.source_entry, row.disabled_reason) == (None, None, None)
        register(store, "new", source="beat-sync:proj", source_entry="new")
        store.set_enabled(SCOPE, "new", False, now=T0, next_due_at=None, reason=REMOVED_FROM_BEAT)
        again = store.get_routine(SCOPE, "new")
        assert again is not None and (again.source, again.disabled_reason) == ("beat-sync:proj", REMOVED_FROM_BEAT)
