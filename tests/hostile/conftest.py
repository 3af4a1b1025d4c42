"""The hostile suite's stores: ONE per module and backend (memory, SQLite, PostgreSQL), each with a
Scheduler over it and a few routines and runs, so hostile calls meet real rows. Hypothesis runs many
examples against the same store: each refusal is checked against a dump of the store taken just
before it, so examples need no fresh store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_support import seeded

from alma_schedule.engine import Scheduler
from alma_schedule.stores import open_store
from alma_schedule.stores.base import Store
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.stores.sql import migrate_store
from tests.stores.sql_support import fast_dir, pg_database


@pytest.fixture(scope="module", params=["memory", "sqlite", pytest.param("pg", marks=pytest.mark.postgres)])
def sched(request: pytest.FixtureRequest) -> Iterator[Scheduler]:
    if request.param == "memory":
        store: Store = MemoryStore()
        yield seeded(store)
        store.close()
        return
    if request.param == "sqlite":
        with fast_dir() as path:
            url = f"sqlite:///{Path(path) / 'hostile.sqlite3'}"
            migrate_store(url)
            store = open_store(url)
            yield seeded(store)
            store.close()
        return
    with pg_database() as url:
        store = open_store(url)
        yield seeded(store)
        store.close()
