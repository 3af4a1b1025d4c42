"""A tracked fixed-delay task routine on a real worker (real Redis, an in-process worker serving the
fleet's queue and alma.collect, a SQLite store): the fleet task's own ``link`` sends the collect of
its run as it ends, so the run is recorded when the result arrives (no tick polls it here), and its
next fire is due 5 s after that recorded end (docs/architecture.md, "Fixed-delay routines")."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from alma_schedule.celery import install
from alma_schedule.engine import create_schedule
from alma_schedule.model import RoutineSpec, Scope
from alma_schedule.runners.task import TaskRunner
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store
from tests.beat import fleet_app
from tests.celery.celery_support import inprocess_worker, wait_for

pytestmark = [
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]

SCOPE = Scope("acme", "delays")
SECOND = timedelta(seconds=1)


@pytest.fixture
def world(redis_url: str, tmp_path: Path) -> Iterator[tuple[Any, Settings]]:
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    migrate_store(url)
    app = fleet_app.make_worker_app(redis_url, redis_url, record_url=redis_url)

    @app.task(name="fleet.nap", shared=False)
    def nap(seconds: float = 1.0) -> float:
        time.sleep(seconds)
        return seconds

    settings = Settings(database_url=url, broker_url=redis_url, result_backend=redis_url)
    install(app, settings=settings)  # our collect task, on the fleet's app, served by its worker
    with inprocess_worker(app, ["celery", settings.collect_queue]):
        yield app, settings


def test_the_run_is_recorded_as_its_task_ends_and_the_next_fire_is_due_the_delay_after(world: Any) -> None:
    app, settings = world
    store = open_store(settings.database_url)
    try:
        schedule = create_schedule(
            store=store, runner=TaskRunner(app, collect_queue=settings.collect_queue), settings=settings
        )
        definition = {"task": "fleet.nap", "kwargs": {"seconds": 0.5}, "track": True, "deadline": "1m"}
        schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, "nap", "task", {"after": "5s"}, definition))
        assert len(schedule.tick().claimed) == 1  # the first fire, at registration: the task is sent
        (run,) = schedule.runs(SCOPE, routine_id="nap")
        assert run.state == "submitted" and settings.poll_first >= 30 * SECOND  # no poll comes in this test

        def ended() -> Any:
            done = schedule.run(SCOPE, "nap", run.run_id)
            return done if done.state == "completed" else None

        done = wait_for(ended, 60, 0.1, "the linked collect to record the run's end")
        assert done.reason == "ok" and done.finished_at is not None
        end = done.finished_at
        whole = end.replace(microsecond=0) + (SECOND if end.microsecond else timedelta(0))
        assert schedule.get(SCOPE, "nap").next_due_at == whole + 5 * SECOND
    finally:
        store.close()
