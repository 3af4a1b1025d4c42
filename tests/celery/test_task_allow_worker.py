"""A real worker on the real Redis refuses at run time a task routine stored before a narrowing of
``task_allow`` / ``queue_allow``: ``refused(not_allowed)``, nothing sent, the failure streak as it was.
The routine still allowed sends its one message, so "nothing sent" is seen, not assumed."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import redis
from celery import Celery
from celery_support import inprocess_worker, utcnow, wait_for

from alma_schedule.celery import install
from alma_schedule.engine import create_schedule
from alma_schedule.model import RoutineSpec, RunKey, RunResult, Scope
from alma_schedule.runners.task import TaskRunner, task_id_for
from alma_schedule.settings import Settings, Timers
from alma_schedule.stores import migrate_store, open_store

pytestmark = [pytest.mark.redis]

SCOPE = Scope("acme", "ops")
#: Registered under the default allow-list; the worker then runs with ALMA_TASK_ALLOW=fleet.ping
#: and ALMA_QUEUE_ALLOW=fleet.sync,fleet.other.
ROUTINES: dict[str, dict[str, Any]] = {
    "task-narrowed": {"task": "fleet.report", "options": {"queue": "fleet.sync"}},
    "queue-narrowed": {"task": "fleet.ping", "options": {"queue": "fleet.reports"}},
    "default-queue": {"task": "fleet.ping"},  # the default celery queue, no longer in ALMA_QUEUE_ALLOW
    "allowed": {"task": "fleet.ping", "options": {"queue": "fleet.sync"}},
}


def messages(r: redis.Redis, queue: str) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.lrange(queue, 0, -1)]


def fleet_app(redis_url: str, sqlite_url: str) -> Celery:
    app = Celery("fleet", set_as_current=False)
    app.conf.update(
        broker_url=redis_url,
        task_serializer="json",
        accept_content=["json"],
        alma_database_url=sqlite_url,
        alma_failure_threshold=2,  # one more count would latch a pause
    )

    @app.task(name="fleet.report", shared=False)
    def report() -> str:
        return "report"

    @app.task(name="fleet.ping", shared=False)
    def ping() -> str:
        return "pong"

    return app


def store_before_the_narrowing(app: Celery, sqlite_url: str) -> None:
    """Register every routine with the default allow-list, and give ``task-narrowed`` a streak of 1."""
    settings = Settings(database_url=sqlite_url)
    store = open_store(sqlite_url)
    try:
        schedule = create_schedule(store=store, runner=TaskRunner(app), settings=settings)
        for routine_id, definition in ROUTINES.items():
            schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, "task", {"every": "1h"}, definition))
        now = utcnow()
        key = RunKey.of(SCOPE, "task-narrowed", "manual:01")
        assert store.claim_manual(key, now=now, expires_at=now + timedelta(hours=1), resend_at=now).won
        assert store.start(key, now=now).won
        assert store.finish(key, RunResult.failed("runner_error"), now=now, timers=Timers.from_settings(settings)).won
        assert store.get_routine(SCOPE, "task-narrowed").consecutive_failures == 1  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_worker_refuses_at_run_time_a_routine_stored_before_the_narrowing(
    redis_url: str, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ALMA_CELERY_APP", "ALMA_TASK_ALLOW", "ALMA_QUEUE_ALLOW"):
        monkeypatch.delenv(name, raising=False)
    migrate_store(sqlite_url)
    app = fleet_app(redis_url, sqlite_url)
    store_before_the_narrowing(app, sqlite_url)
    monkeypatch.setenv("ALMA_TASK_ALLOW", "fleet.ping")
    monkeypatch.setenv("ALMA_QUEUE_ALLOW", "fleet.sync,fleet.other")
    composition = install(app)
    r = redis.Redis.from_url(redis_url)
    try:
        assert composition.settings.task_allow == ("fleet.ping",)
        store = composition.store()
        with inprocess_worker(app, ["alma.run"]):  # the fleet's queues have no consumer: what is sent stays
            keys = {rid: composition.schedule().trigger(SCOPE, rid).key for rid in ROUTINES}
            done = {
                rid: wait_for(
                    lambda key=key: (rec := store.get(key)) is not None and rec.terminal and rec,
                    timeout=60,
                    what=f"{rid} finished by the worker",
                )
                for rid, key in keys.items()
            }
        for rid in ("task-narrowed", "queue-narrowed", "default-queue"):
            assert (done[rid].state, done[rid].reason) == ("refused", "not_allowed"), done[rid]
        assert (done["allowed"].state, done["allowed"].reason) == ("completed", "sent")
        # nothing sent for the refused ones: the one message on the fleet's queues is the allowed fire's
        (sent,) = messages(r, "fleet.sync")
        assert sent["headers"]["task"] == "fleet.ping" and sent["headers"]["id"] == task_id_for(keys["allowed"])
        assert messages(r, "fleet.reports") == [] and messages(r, "celery") == []
        # never counted for the streak: still 1, and no pause latched at the threshold of 2
        narrowed = store.get_routine(SCOPE, "task-narrowed")
        assert narrowed is not None and (narrowed.consecutive_failures, narrowed.paused_reason) == (1, None)
        assert all(
            store.get_routine(SCOPE, rid).consecutive_failures == 0 for rid in ROUTINES if rid != "task-narrowed"
        )  # type: ignore[union-attr]
    finally:
        r.close()
        composition.close()
