"""Our queues run only our tasks (issue 45, item 11), with a real worker on the real Redis serving
``alma.run`` and the fleet's own queue ``celery``.

``celery.backend_cleanup`` and a fleet task sent to ``alma.run``: refused (one warning line),
dead-lettered with their headers and the reason, acked, never run; the worker goes on: the same fleet
task on ``celery`` runs, and so does a tick's claimed fire on ``alma.run``. Before, both ran.
A ``task`` header no dict can hold (a list), on either queue: answered as an unknown task, the
worker goes on (before, ``TypeError: unhashable type`` out of the consumer).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from celery import Celery
from celery.signals import task_prerun
from celery_support import inprocess_worker, utcnow, wait_for
from kombu import Connection

from alma_schedule.celery import install
from alma_schedule.engine import create_schedule
from alma_schedule.model import RUN_TASK, RoutineSpec, Scope
from alma_schedule.runners.task import TaskRunner
from alma_schedule.tasks import CeleryDispatcher
from alma_schedule.tasks.composition import Composition

pytestmark = [pytest.mark.redis]

SCOPE = Scope("acme", "only-ours")
QUEUES = ["alma.run", "celery"]


class Fleet:
    """A fleet app with one task (``fleet.add``, recorded when it runs) and ``install(app)``."""

    def __init__(self, redis_url: str, store: str) -> None:
        self.added: list[list[int]] = []
        self.started: list[str] = []
        self.app = Celery("fleet", set_as_current=False)
        self.app.conf.update(broker_url=redis_url, alma_database_url=store, timezone="UTC")

        @self.app.task(name="fleet.add", shared=False)
        def add(x: int, y: int) -> int:
            self.added.append([x, y])
            return x + y

        self.composition: Composition = install(self.app)

    def on_prerun(self, sender: Any = None, **_: Any) -> None:
        self.started.append(str(getattr(sender, "name", sender)))


@pytest.fixture
def fleet(redis_url: str, migrated_sqlite_url: str) -> Iterator[Fleet]:
    out = Fleet(redis_url, migrated_sqlite_url)
    task_prerun.connect(out.on_prerun, weak=False)
    try:
        yield out
    finally:
        task_prerun.disconnect(out.on_prerun)
        out.composition.close()


def dead_letters(r: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(item) for item in reversed(r.lrange("alma.dead", 0, -1))]  # oldest first


def test_a_task_that_is_not_ours_on_our_queue_is_refused_and_the_worker_goes_on(
    fleet: Fleet, redis_client: redis.Redis
) -> None:
    app, settings = fleet.app, fleet.composition.settings
    schedule = create_schedule(
        store=fleet.composition.store(),
        runner=TaskRunner(app),
        dispatcher=CeleryDispatcher(app, settings),
        settings=settings,
    )
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "adds", "task", {"every": "1h"}, {"task": "fleet.add", "args": [5, 6]})
    schedule.register(spec, now=utcnow() - timedelta(hours=1, seconds=1))
    with inprocess_worker(app, QUEUES):
        cleanup = app.send_task("celery.backend_cleanup", queue="alma.run").id
        foreign = app.send_task("fleet.add", args=[1, 2], queue="alma.run").id
        wait_for(lambda: len(dead_letters(redis_client)) >= 2, 30, 0.1, "two dead letters")
        app.send_task("fleet.add", args=[3, 4], queue="celery")
        assert len(schedule.tick().claimed) == 1  # its run on alma.run, its fleet.add on celery
        wait_for(lambda: len(fleet.added) >= 2, 30, 0.1, "the fleet task on its own queue and the run's")
        wait_for(lambda: schedule.store.list_runs(SCOPE, state="completed"), 30, 0.1, "the run to complete")

    assert sorted(fleet.added) == [[3, 4], [5, 6]]  # never [1, 2]
    assert "celery.backend_cleanup" not in fleet.started
    assert fleet.started.count("fleet.add") == 2 and fleet.started.count(RUN_TASK) == 1
    dead = dead_letters(redis_client)
    assert [d["headers"]["x-alma-headers"]["id"] for d in dead] == [cleanup, foreign]
    assert {d["headers"]["x-alma-queue"] for d in dead} == {"alma.run"}
    for d, name in zip(dead, ("celery.backend_cleanup", "fleet.add"), strict=True):
        assert (
            d["headers"]["x-alma-refused"] == f"the task {name!r} is not alma_schedule's: alma.run runs only our tasks"
        )
    assert {q: redis_client.llen(q) for q in QUEUES} == dict.fromkeys(QUEUES, 0)


@pytest.mark.parametrize("queue", QUEUES)
def test_a_task_header_no_dict_can_hold_is_an_unknown_task(
    fleet: Fleet, redis_url: str, redis_client: redis.Redis, queue: str
) -> None:
    with inprocess_worker(fleet.app, QUEUES):
        with Connection(redis_url) as conn:
            conn.Producer().publish(
                json.dumps([[], {}, {}]).encode(),
                routing_key=queue,
                content_type="application/json",
                content_encoding="utf-8",
                headers={"task": ["fleet.add"], "id": str(uuid.uuid4())},
            )
        wait_for(lambda: not redis_client.llen(queue), 30, 0.1, "the message taken")
        fleet.app.send_task("fleet.add", args=[7, 8], queue="celery")
        wait_for(lambda: fleet.added, 30, 0.1, "the next message to run")
    assert fleet.added == [[7, 8]]
    assert len(dead_letters(redis_client)) == (1 if queue == "alma.run" else 0)  # the fleet's: Celery's answer
