"""A worker whose pool runs tasks in threads of its own process (``-P threads``) sizes the store's
connection pool to its concurrency, so its runs never wait on each other for a connection; a prefork
or solo worker keeps the default (each prefork child opens its own store). Celery's real
``WorkController`` (its bootsteps applied, nothing started) on a migrated SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery import Celery

from alma_schedule.celery import install
from alma_schedule.stores import migrate_store
from alma_schedule.tasks.composition import composition_of


@pytest.mark.parametrize(
    ("pool", "concurrency", "connections"), [("threads", 9, 9), ("prefork", 3, None), ("solo", 1, None)]
)
def test_a_threaded_workers_store_has_a_connection_per_thread(
    tmp_path: Path, pool: str, concurrency: int, connections: int | None
) -> None:
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    migrate_store(url)
    app = Celery("threaded", broker="memory://", set_as_current=False)
    app.conf.alma_database_url = url
    install(app)
    try:
        app.WorkController(pool_cls=pool, concurrency=concurrency, queues=["alma.run"], without_mingle=True)
        composition = composition_of(app)
        assert composition is not None and composition.connections == connections
        store = composition.store()
        size = store._engine.pool.size()  # type: ignore[attr-defined]
        assert size == (max(connections, 5) if connections else 5)  # SQLite's steady pool is at least 5
        store.close()
    finally:
        app.close()
