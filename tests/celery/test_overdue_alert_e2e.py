"""The "did not run" alarm end to end (issue 52): an ``expect: 30s`` routine whose run workers are
stopped (nothing serves alma.run) is named overdue by the tick report and the store gauge, and its
alert is posted by a real worker serving alma.collect (``alma_schedule.alert``) to a real local
HTTP receiver: a 500 then a 2xx gives two signed posts with the same ``Idempotency-Key``, then none;
a run that succeeds clears it. Real PostgreSQL and Redis; the tick's time is a settable clock."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from celery_support import Procs, alma_env, make_settings, utcnow, wait_for, wait_worker_ready

from alma_schedule.celery import create_app
from alma_schedule.dashboard.metrics import StoreGauges
from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.model import RoutineSpec, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.policies.overdue import alert_retry_delay
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.settings import Secret
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.tasks import CeleryDispatcher
from alma_schedule.testing.servers import serve_asgi
from alma_schedule.testing.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme", "ops")
SECRET = "an-alert-secret-of-32-bytes-long"


@dataclass
class World:
    schedule: Scheduler
    clock: SettableTime
    receiver: WebhookReceiver
    gauges: StoreGauges


@pytest.fixture
def world(pg_url: str, redis_url: str, tmp_path: Path) -> Iterator[World]:
    migrate_store(pg_url)
    receiver = WebhookReceiver(SECRET, status=500)
    clock = SettableTime(utcnow())
    with serve_asgi(receiver.app) as server:
        url = f"{server.url}/alerts"
        settings = make_settings(
            pg_url,
            redis_url,
            provider="scripted",
            sink="stdout",
            alert_webhook=url,
            webhook_secret=Secret(SECRET),
            clock=clock,
        )
        registry = KindRegistry(settings)
        app = create_app(settings, registry=registry)
        store = open_store(pg_url)
        dispatcher = CeleryDispatcher(app, settings)
        schedule = create_schedule(store=store, runner=registry.resolve, dispatcher=dispatcher, settings=settings)
        procs = Procs(tmp_path)
        env = alma_env(
            settings,
            tmp_path,
            ALMA_PROVIDER="scripted",
            ALMA_SINK="stdout",
            ALMA_ALERT_WEBHOOK=url,
            ALMA_WEBHOOK_SECRET=SECRET,
        )
        try:
            procs.worker("alerts", env, "alma.collect")  # the run workers are stopped: nothing serves alma.run
            wait_worker_ready(procs, "alerts", 120)
            yield World(schedule, clock, receiver, StoreGauges(settings, lambda: store, lambda: None))
        finally:
            procs.stop_all()
            store.close()


def test_an_unrun_fire_is_reported_counted_and_alerted_once_with_its_key_then_cleared(world: World) -> None:
    schedule, clock, receiver = world.schedule, world.clock, world.receiver
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "watched", "turn", {"every": "1m", "expect": "30s"}, {"goal": "g"})
    schedule.register(spec)
    due = schedule.get(SCOPE, "watched").next_due_at
    assert due is not None
    clock.set(due + timedelta(seconds=31))
    report = schedule.tick()
    [claimed] = report.claimed
    [fire] = report.overdue
    key = f"acme/ops/watched/{due.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    assert (fire.key, fire.run_id, fire.state) == (key, claimed.run_id, "claimed")
    assert report.to_dict()["ids"]["overdue"] == [key]
    assert world.gauges.values()["overdue"] == 1

    # the first post is answered 500: the task sends itself again after the back-off (within a minute)
    assert alert_retry_delay(1) <= timedelta(minutes=1)
    wait_for(lambda: len(receiver.received) >= 1, 60, 0.1, "the first alert post")
    receiver.status = 204
    wait_for(lambda: len(receiver.received) >= 2, 90, 0.1, "the retried alert post")
    first, second = receiver.received[:2]
    assert (first.status, second.status) == (500, 204)
    assert first.idempotency_key == second.idempotency_key == key
    assert first.verified and second.verified  # signed as the webhook sink signs
    assert json.loads(second.body) == {
        "alert": "did_not_run",
        "fire_at": due.isoformat(),
        "idempotency_key": key,
        "org": "acme",
        "routine_id": "watched",
        "uid": "ops",
    }
    store = schedule.store
    wait_for(lambda: (store.alert_state(fire.fire_key) or fire).delivered_at is not None, 30, 0.1, "delivered")

    # still overdue (nothing ran), named on the next tick, never posted again
    clock.advance(timedelta(seconds=15))
    [again] = schedule.tick().overdue
    assert again.key == key and again.delivered_at is not None
    time.sleep(3)  # a stray third post would have arrived by now (the worker is idle)
    assert len(receiver.received) == 2

    # a run that succeeds clears it (the scripted provider's turn, executed here)
    clock.set(due + timedelta(minutes=1))
    [nxt] = schedule.tick().claimed
    rec = schedule.execute(nxt)
    if rec.state == "submitted":
        rec = schedule.collect(nxt)
    assert rec.state == "completed", rec
    clock.advance(timedelta(seconds=15))
    assert schedule.tick().overdue == ()
    fresh = StoreGauges(schedule.settings, lambda: store, lambda: None)
    assert fresh.values()["overdue"] == 0
