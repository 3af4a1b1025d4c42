"""The task runner on a real worker: the fleet's tasks run on an in-process Celery worker over the
real Redis (broker and result backend), the engine ticks at simulated instants and runs its fires
in-process. Untracked sends end ``completed(sent)`` and leave the streak alone; tracked ones end
with the fleet task's real outcome, or ``timed_out`` past their deadline."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.model import RoutineSpec, RunRecord, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.task import TaskRunner, task_id_for
from alma_schedule.settings import Settings
from alma_schedule.stores.memory import MemoryStore
from tests.beat import fleet_app
from tests.celery.celery_support import inprocess_worker, revoke_on_worker, wait_for

# addopts' ``-W error`` outranks the ini filter; a mark outranks both (celery's redis backend
# calls redis-py's deprecated ``setex`` when it stores a result, in the worker thread).
pytestmark = [
    pytest.mark.redis,
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]

SCOPE = Scope("acme", "ops")
T0 = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def fleet(redis_url: str) -> Iterator[Any]:
    app = fleet_app.make_worker_app(redis_url, redis_url, record_url=redis_url)
    with inprocess_worker(app, ["celery"]):
        yield app


@pytest.fixture
def clock() -> SettableTime:
    return SettableTime(T0)


@pytest.fixture
def schedule(fleet: Any, clock: SettableTime) -> Scheduler:
    return create_schedule(store=MemoryStore(), runner=TaskRunner(fleet), settings=Settings(clock=clock))


def ran(redis_url: str) -> list[str]:
    r = redis.Redis.from_url(redis_url)
    try:
        return [x.decode() for x in r.lrange("fleet:ran", 0, -1)]
    finally:
        r.close()


def tick_at(schedule: Scheduler, clock: SettableTime, at: datetime) -> Any:
    clock.set(at)
    return schedule.tick(now=at)


def only_run(schedule: Scheduler, routine_id: str, state: str | None = None) -> RunRecord:
    runs = schedule.runs(SCOPE, routine_id=routine_id, state=state)
    assert len(runs) == 1, runs
    return runs[0]


def register(schedule: Scheduler, routine_id: str, definition: dict[str, Any], every: str = "1m") -> None:
    schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, "task", {"every": every}, definition))


def test_untracked_sends_once_completes_sent_and_leaves_the_streak(
    schedule: Scheduler, clock: SettableTime, fleet: Any, redis_url: str
) -> None:
    # a failing tracked fire first: the streak is 1
    register(schedule, "r", {"task": "fleet.boom", "track": True, "deadline": "10m"})
    report = tick_at(schedule, clock, T0 + MINUTE)
    assert len(report.claimed) == 1
    first = only_run(schedule, "r")
    assert first.state == "submitted"
    wait_for(lambda: fleet.AsyncResult(first.target_task_id).ready(), what="fleet.boom done")
    tick_at(schedule, clock, T0 + MINUTE + timedelta(seconds=30))
    assert schedule.run(SCOPE, "r", first.run_id).state == "failed"
    assert schedule.get(SCOPE, "r").consecutive_failures == 1
    # now untracked: completed(sent), the streak still 1 (a completed(ok) would reset it)
    register(schedule, "r", {"task": "fleet.add", "args": [40, 2]})
    tick_at(schedule, clock, T0 + 2 * MINUTE)
    sent = only_run(schedule, "r", "completed")
    assert sent.reason == "sent"
    assert schedule.get(SCOPE, "r").consecutive_failures == 1
    tid = task_id_for(sent.key)
    wait_for(lambda: f"fleet.add:{tid}" in ran(redis_url), what="fleet.add ran")
    assert fleet.AsyncResult(tid).get(timeout=10) == 42
    # the same fire executed again (a duplicate run message) sends nothing more
    again = schedule.execute(sent.key)
    assert again.state == "completed"
    assert [x for x in ran(redis_url) if x.startswith("fleet.add:")] == [f"fleet.add:{tid}"]


def test_tracked_success_is_completed_ok_with_the_target_task_id(
    schedule: Scheduler, clock: SettableTime, fleet: Any, redis_url: str
) -> None:
    register(schedule, "t", {"task": "fleet.add", "args": [1, 2], "track": True, "deadline": "10m"})
    tick_at(schedule, clock, T0 + MINUTE)
    run = only_run(schedule, "t")
    assert run.state == "submitted"
    assert run.target_task_id == task_id_for(run.key)
    assert run.deadline == T0 + MINUTE + 10 * MINUTE
    wait_for(lambda: fleet.AsyncResult(run.target_task_id).ready(), what="fleet.add done")
    report = tick_at(schedule, clock, T0 + MINUTE + timedelta(seconds=30))
    assert [str(k) for k in report.collect] == [str(run.key)]
    done = schedule.run(SCOPE, "t", run.run_id)
    assert (done.state, done.reason) == ("completed", "ok")
    assert schedule.get(SCOPE, "t").consecutive_failures == 0
    assert ran(redis_url) == [f"fleet.add:{run.target_task_id}"]


def test_tracked_failure_is_failed_task_failed_with_the_exception_class(
    schedule: Scheduler, clock: SettableTime, fleet: Any
) -> None:
    register(schedule, "b", {"task": "fleet.boom", "track": True, "deadline": "10m"})
    tick_at(schedule, clock, T0 + MINUTE)
    run = only_run(schedule, "b")
    wait_for(lambda: fleet.AsyncResult(run.target_task_id).ready(), what="fleet.boom done")
    tick_at(schedule, clock, T0 + MINUTE + timedelta(seconds=30))
    done = schedule.run(SCOPE, "b", run.run_id)
    assert (done.state, done.reason, done.error_class) == ("failed", "task_failed", "FleetError")
    assert schedule.get(SCOPE, "b").consecutive_failures == 1


def test_tracked_revoked_is_failed_task_revoked(
    schedule: Scheduler, clock: SettableTime, fleet: Any, redis_url: str
) -> None:
    register(schedule, "v", {"task": "fleet.add", "track": True, "deadline": "10m"})
    # the fire's task id is known before it is sent: revoke it on the worker first
    fire = schedule.plan(now=T0 + MINUTE).due[0]
    from alma_schedule.model import RunKey

    tid = task_id_for(RunKey(SCOPE.org, SCOPE.uid, "v", fire.run_id))
    revoke_on_worker(fleet, tid)
    tick_at(schedule, clock, T0 + MINUTE)
    run = only_run(schedule, "v")
    assert run.target_task_id == tid
    wait_for(lambda: fleet.AsyncResult(tid).state == "REVOKED", what="revoked state stored")
    tick_at(schedule, clock, T0 + MINUTE + timedelta(seconds=30))
    done = schedule.run(SCOPE, "v", run.run_id)
    assert (done.state, done.reason) == ("failed", "task_revoked")
    assert schedule.get(SCOPE, "v").consecutive_failures == 1
    assert not [x for x in ran(redis_url) if tid in x], "a revoked task never executes"


def test_tracked_past_its_deadline_is_timed_out(schedule: Scheduler, clock: SettableTime) -> None:
    # sent to a queue no worker consumes: the result stays PENDING
    register(
        schedule,
        "d",
        {"task": "fleet.add", "options": {"queue": "fleet.nowhere"}, "track": True, "deadline": "5m"},
        every="1h",
    )
    fire_at = T0 + timedelta(hours=1)
    tick_at(schedule, clock, fire_at)
    run = only_run(schedule, "d")
    assert run.state == "submitted"
    tick_at(schedule, clock, fire_at + timedelta(seconds=30))
    pending = schedule.run(SCOPE, "d", run.run_id)
    assert pending.state == "submitted" and pending.poll_attempts == 1  # polled: still PENDING
    report = tick_at(schedule, clock, fire_at + timedelta(minutes=6))
    assert [str(k) for k in report.collect] == [str(run.key)]
    done = schedule.run(SCOPE, "d", run.run_id)
    assert (done.state, done.reason) == ("timed_out", "deadline_passed")
    assert schedule.get(SCOPE, "d").consecutive_failures == 1
