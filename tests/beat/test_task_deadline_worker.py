"""A tracked task's deadline on a real worker (issue 14, defect 6): real time, an in-process fleet
worker (solo pool: one task at a time) on the real Redis, the engine in-process.

* The message carries ``expires`` at the deadline: a tracked task stuck behind a backlog past its
  deadline is revoked by the worker, never executed (its side effect absent), and the run is
  ``timed_out``.
* A tracked task that started in time and finishes past the deadline: the run is ``timed_out``
  past deadline + ``clock_tolerance``, the collect logs the task's state, and its late result
  changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.model import RoutineSpec, RunKey, RunRecord, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.task import TaskRunner, task_id_for
from alma_schedule.settings import Settings
from alma_schedule.stores.memory import MemoryStore
from tests.beat import fleet_app
from tests.beat.test_beat_runner_worker import ran
from tests.celery.celery_support import inprocess_worker, revoke_on_worker, wait_for

pytestmark = [
    pytest.mark.redis,
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]

SCOPE = Scope("acme", "deadlines")


@pytest.fixture
def fleet(redis_url: str) -> Iterator[Any]:
    app = fleet_app.make_worker_app(redis_url, redis_url, record_url=redis_url)

    @app.task(name="fleet.nap", bind=True, shared=False)
    def nap(self: Any, seconds: float = 1.0) -> float:
        r = redis.Redis.from_url(redis_url)
        try:
            r.rpush("fleet:ran", f"fleet.nap:{self.request.id}")  # the side effect, at the start
        finally:
            r.close()
        time.sleep(seconds)
        return seconds

    with inprocess_worker(app, ["celery"]):
        yield app


@pytest.fixture
def schedule(fleet: Any) -> Scheduler:
    settings = Settings(poll_first=timedelta(seconds=1), poll_max=timedelta(seconds=1))
    return create_schedule(store=MemoryStore(), runner=TaskRunner(fleet), settings=settings)


def fire_now(schedule: Scheduler, routine_id: str, definition: dict[str, Any]) -> RunRecord:
    """Register an hourly routine due now and tick: its one run (executed in-process) is returned."""
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, "task", {"every": "1h"}, definition)
    schedule.register(spec, now=datetime.now(UTC) - timedelta(hours=1, seconds=1))
    assert len(schedule.tick().claimed) == 1
    (run,) = schedule.runs(SCOPE, routine_id=routine_id)
    return run


def past(instant: datetime) -> None:
    wait_for(lambda: datetime.now(UTC) > instant, 30, 0.05, f"the clock past {instant}")


def timed_out_past_the_tolerance(schedule: Scheduler, run: RunRecord, caplog: pytest.LogCaptureFixture) -> RunRecord:
    """Wait past the run's deadline + clock_tolerance, tick (it polls the run), return it ``timed_out``."""
    assert run.deadline is not None
    past(run.deadline + schedule.settings.clock_tolerance)
    with caplog.at_level(logging.WARNING, logger="alma_schedule.engine"):
        schedule.tick()
    done = schedule.run(SCOPE, run.routine_id, run.run_id)
    assert (done.state, done.reason) == ("timed_out", "deadline_passed")
    return done


def test_a_tracked_task_behind_a_backlog_past_its_deadline_is_revoked_never_run(
    schedule: Scheduler, fleet: Any, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = fleet.send_task("fleet.nap", kwargs={"seconds": 5})
    wait_for(lambda: f"fleet.nap:{blocker.id}" in ran(redis_url), 30, 0.05, "the worker busy with the backlog")
    run = fire_now(schedule, "late", {"task": "fleet.add", "args": [1, 2], "track": True, "deadline": "1s"})
    assert run.state == "submitted" and run.deadline is not None
    tid = task_id_for(run.key)
    assert run.target_task_id == tid
    wait_for(lambda: fleet.AsyncResult(tid).state == "REVOKED", 60, 0.1, "the worker to revoke the expired task")
    timed_out_past_the_tolerance(schedule, run, caplog)
    assert f"its task {tid} was revoked (an expired message never starts)" in caplog.text
    assert f"fleet.add:{tid}" not in ran(redis_url)  # timed_out means it did not run
    assert blocker.get(timeout=30) == 5


def test_a_tracked_task_that_finishes_past_its_deadline_stays_timed_out_and_is_logged(
    schedule: Scheduler, fleet: Any, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    run = fire_now(schedule, "slow", {"task": "fleet.nap", "kwargs": {"seconds": 6}, "track": True, "deadline": "1s"})
    assert run.deadline is not None
    tid = task_id_for(run.key)
    wait_for(lambda: f"fleet.nap:{tid}" in ran(redis_url), 30, 0.05, "the tracked task to start in time")
    done = timed_out_past_the_tolerance(schedule, run, caplog)
    assert f"its task {tid} is PENDING: a late result will not change the run" in caplog.text
    assert fleet.AsyncResult(tid).get(timeout=30) == 6  # it still finished, late
    schedule.tick()
    assert schedule.collect(run.key) == schedule.run(SCOPE, "slow", run.run_id)
    after = schedule.run(SCOPE, "slow", run.run_id)
    assert (after.state, after.reason, after.finished_at) == ("timed_out", "deadline_passed", done.finished_at)
    assert schedule.get(SCOPE, "slow").consecutive_failures == 1


def test_a_late_result_already_in_when_the_run_times_out_is_logged_and_the_run_stays_timed_out(
    schedule: Scheduler, fleet: Any, caplog: pytest.LogCaptureFixture
) -> None:
    run = fire_now(schedule, "later", {"task": "fleet.nap", "kwargs": {"seconds": 4}, "track": True, "deadline": "1s"})
    assert run.deadline is not None
    tid = task_id_for(run.key)
    assert fleet.AsyncResult(tid).get(timeout=30) == 4  # done, past deadline + tolerance (3 s)
    timed_out_past_the_tolerance(schedule, run, caplog)
    assert f"its task {tid} finished late (SUCCESS at " in caplog.text
    assert "the run stays timed_out" in caplog.text


def test_a_message_revoked_at_its_deadline_is_timed_out_not_failed(fleet: Any) -> None:
    """Simulated time: the fleet task is revoked on the worker before it is sent (as Celery does
    with the expired message); a poll past the deadline but within the tolerance waits, a poll at
    deadline + tolerance records ``timed_out``, never ``failed(task_revoked)``."""
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=1)
    clock = SettableTime(start)
    schedule = create_schedule(store=MemoryStore(), runner=TaskRunner(fleet), settings=Settings(clock=clock))
    spec = RoutineSpec(
        SCOPE.org,
        SCOPE.uid,
        "expired",
        "task",
        {"every": "1h"},
        {"task": "fleet.add", "track": True, "deadline": "10m"},
    )
    schedule.register(spec, now=start)
    fire = schedule.plan(now=start + timedelta(hours=1)).due[0]
    tid = task_id_for(RunKey(SCOPE.org, SCOPE.uid, "expired", fire.run_id))
    revoke_on_worker(fleet, tid)
    clock.set(start + timedelta(hours=1))
    schedule.tick(now=clock())
    (run,) = schedule.runs(SCOPE, routine_id="expired")
    assert run.deadline is not None
    wait_for(lambda: fleet.AsyncResult(tid).state == "REVOKED", 30, 0.1, "the revoked state stored")
    clock.set(run.deadline + schedule.settings.clock_tolerance - timedelta(seconds=1))
    assert schedule.collect(run.key).state == "submitted"
    clock.set(run.deadline + schedule.settings.clock_tolerance)  # when its poll is due
    done = schedule.collect(run.key)
    assert (done.state, done.reason) == ("timed_out", "deadline_passed")
