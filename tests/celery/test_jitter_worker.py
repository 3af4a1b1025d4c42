"""jitter through a real Celery worker on the real Redis and PostgreSQL: a jittered fire is not
claimed, sent or run before its jittered instant, and runs once at it, under its nominal run id."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery_support import Recorder, inprocess_worker, make_settings, ready_app, utcnow, wait_for

from alma_schedule.clock import send_tick
from alma_schedule.core import fire_id
from alma_schedule.model import RoutineSpec, Scope
from alma_schedule.policies.jitter import jitter_offset
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import composition_of

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

QUEUES = ["alma.tick", "alma.run", "alma.collect"]
SCOPE = Scope("acme", "jitter")
JITTER = timedelta(seconds=20)


def test_a_jittered_fire_runs_at_its_jittered_instant_not_before(pg_url: str, redis_url: str) -> None:
    migrate_store(pg_url)
    settings = make_settings(pg_url, redis_url)
    recorder = Recorder()
    app = ready_app(settings, recorder)
    # an hourly fire whose nominal instant passed two seconds ago; a routine id whose jitter puts
    # its due instant at least six seconds from now (the offset is known in advance: it is stable)
    fire = utcnow().replace(microsecond=0) - timedelta(seconds=2)
    hour = timedelta(hours=1)
    offsets = {f"r{i}": jitter_offset(SCOPE.org, SCOPE.uid, f"r{i}", fire, JITTER, hour) for i in range(200)}
    rid, offset = next((rid, o) for rid, o in offsets.items() if o >= timedelta(seconds=8))
    due = fire + offset
    schedule = composition_of(app).schedule()  # type: ignore[union-attr]
    store = composition_of(app).store()  # type: ignore[union-attr]
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, rid, "noop", {"every": "1h", "jitter": "20s"})
    receipt = schedule.register(spec, now=fire - timedelta(hours=1))
    assert receipt.routine.next_due_at == due == receipt.next_fires[0]
    try:
        with inprocess_worker(app, QUEUES):
            early = app.AsyncResult(send_tick(settings)).get(timeout=30)
            assert early["at"] < due.isoformat()  # this tick ran before the due instant ...
            assert early["claimed"] == 0 and early["next_wake_at"] == due.isoformat()  # ... and claimed nothing
            assert store.list_runs(SCOPE) == [] and recorder.keys == []
            wait_for(lambda: utcnow() >= due, timeout=60, what="the jittered instant")
            late = app.AsyncResult(send_tick(settings)).get(timeout=30)
            assert late["claimed"] == 1
            wait_for(lambda: store.list_runs(SCOPE, state="completed"), timeout=30, what="the completed run")
        [run] = store.list_runs(SCOPE)
        assert (run.run_id, run.fire_at, run.due_at) == (fire_id(fire), fire, due)
        assert run.claimed_at >= due and run.started_at is not None and run.started_at >= due
        assert run.lag is not None and run.lag >= timedelta(0)
        assert [k.run_id for k in recorder.keys] == [fire_id(fire)]  # ran once
    finally:
        composition_of(app).close()  # type: ignore[union-attr]
