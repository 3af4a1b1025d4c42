"""execute, collect, record and the run handle."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from engine_support import HOUR, MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.errors import InvalidInput, NotFound
from alma_schedule.model import Ceiling, Routine, RunHandle, RunKey, RunResult


def _claim(sched, clock, routine_id="r1", at=T0 + 5 * MINUTE):
    clock.set(at)
    disp = sched.dispatcher
    n = len(disp.runs)
    sched.tick()
    return disp.runs[n].key


def test_a_runner_that_raises_is_failed_runner_error_with_its_class_only(make, clock, runner, caplog) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "*/5 * * * *"}, behave="raise"))
    key = _claim(sched, clock)
    with caplog.at_level(logging.ERROR, logger="alma_schedule.engine"):
        done = sched.execute(key)
    assert (done.state, done.reason, done.error_class) == ("failed", "runner_error", "ZeroDivisionError")
    assert "secret provider text 42" not in repr(done.to_dict())
    assert "secret provider text 42" in caplog.text  # the message lives in the logs only
    assert sched.get(SCOPE, "r1").consecutive_failures == 1


def test_execute_runs_a_fire_at_most_once(make, clock, runner) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    key = _claim(sched, clock)
    first = sched.execute(key)
    second = sched.execute(key)
    assert (first.state, first.reason) == ("completed", "ok")
    assert second == first
    assert runner.ran() == [key.run_id]
    with pytest.raises(NotFound):
        sched.execute(RunKey(SCOPE.org, SCOPE.uid, "r1", "2026-01-01T00:00:00Z"))


@every_store
def test_the_finish_reads_the_clock_after_the_runner(make, clock, runner) -> None:
    """A run called without ``now`` (as the Celery run task calls it) lasts what its runner took."""
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    key = _claim(sched, clock)
    began = clock()
    runner.on_run = lambda routine, handle: clock.set(began + timedelta(seconds=42))
    done = sched.execute(key)
    assert done.state == "completed"
    assert (done.started_at, done.finished_at) == (began, began + timedelta(seconds=42))


def test_an_inactive_routine_ends_skipped_with_that_reason(make, clock, runner) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    key = _claim(sched, clock)
    sched.pause(SCOPE, "r1")
    done = sched.execute(key)
    assert (done.state, done.reason) == ("skipped", "paused")
    assert runner.ran() == []


def test_unknown_kind_at_run_time_is_failed_unknown_kind(make, clock, runner) -> None:
    served = {"script"}

    def resolver(routine: Routine):
        if routine.kind not in served:
            raise KeyError(routine.kind)
        return runner

    sched = make(dispatcher=RecordingDispatcher(), runner_=resolver)
    sched.register(spec("r1"))
    record = sched.trigger(SCOPE, "r1")
    served.clear()  # the deployment stopped serving the kind between the claim and the run
    done = sched.execute(record.key)
    assert (done.state, done.reason, done.error_class) == ("failed", "unknown_kind", "KeyError")


@pytest.mark.parametrize(("behave", "error_class"), [("lie", "NotSubmitted"), ("garbage", "InvalidRunResult")])
def test_invalid_runner_answers_fail_the_run(make, clock, behave, error_class) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "*/5 * * * *"}, behave=behave))
    done = sched.execute(_claim(sched, clock))
    assert (done.state, done.reason, done.error_class) == ("failed", "runner_error", error_class)


@every_store
def test_submit_then_collect_delivers_once(make, clock, runner) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "0 * * * *"}, behave="submit", polls=2))
    key = _claim(sched, clock, at=T0 + HOUR)
    submitted = sched.execute(key)
    assert submitted.state == "submitted"
    assert (submitted.batch_id, submitted.next_poll_at) == (
        f"batch-{key.run_id}",
        T0 + HOUR + timedelta(seconds=30),
    )
    assert sched.plan(now=T0 + HOUR + MINUTE).polls == (
        {
            "org": "org-a",
            "uid": "user-1",
            "routine_id": "r1",
            "run_id": key.run_id,
            "collect_run_id": key.run_id,
        },
    )
    clock.set(T0 + HOUR + MINUTE)
    assert [k.run_id for k in sched.tick().collect] == [key.run_id]
    assert sched.collect(key).state == "submitted"  # one poll: still pending, nothing written
    clock.set(T0 + HOUR + 3 * MINUTE)
    (poll,) = sched.tick().collect
    assert poll == key
    done = sched.collect(key)
    again = sched.collect(key)
    assert (done.state, done.reason, done.cost_micros) == ("completed", "delivered", 7)
    assert again == done
    assert runner.deliveries == [key]


def test_collect_at_the_deadline_plus_the_clock_tolerance_times_out_never_before(make, clock, runner) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    tolerance = sched.settings.clock_tolerance
    assert tolerance > timedelta(seconds=1)
    sched.register(spec("r1", {"cron": "0 * * * *"}, behave="submit", deadline_s=600, polls=99))
    key = _claim(sched, clock, at=T0 + HOUR)
    sched.execute(key)
    deadline = T0 + HOUR + 10 * MINUTE
    clock.set(deadline)
    assert [k.run_id for k in sched.tick().blocked] == []  # at the deadline, not past it
    assert sched.collect(key).state == "submitted"
    clock.set(deadline + timedelta(seconds=1))
    assert [k.run_id for k in sched.tick().blocked] == [key.run_id]  # past it: shown
    # ... but a worker whose clock trails by up to the tolerance may still start its message
    assert sched.collect(key).state == "submitted"
    clock.set(deadline + tolerance - timedelta(microseconds=1))
    assert sched.collect(key).state == "submitted"
    clock.set(deadline + tolerance)  # when its poll is due (policies.backoff.next_poll)
    polled = len(runner.collects)
    done = sched.collect(key)
    assert (done.state, done.reason) == ("timed_out", "deadline_passed")
    assert len(runner.collects) == polled  # past the deadline the runner is not asked
    assert sched.get(SCOPE, "r1").consecutive_failures == 1


@every_store
def test_a_changed_revision_never_completes(make, clock, runner) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "0 * * * *"}, behave="submit", ignore_revision=True, polls=0))
    key = _claim(sched, clock, at=T0 + HOUR)
    sched.execute(key)
    sched.register(spec("r1", {"cron": "0 * * * *"}, behave="submit", ignore_revision=True, polls=0, sink="new"))
    clock.set(T0 + HOUR + MINUTE)
    done = sched.collect(key)
    assert (done.state, done.reason, done.cost_micros) == ("failed", "config_revision_changed", 7)
    assert sched.get(SCOPE, "r1").consecutive_failures == 0  # config_revision_changed does not count


def test_a_well_behaved_runner_repairs_cost_without_delivering(make, clock, runner) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "0 * * * *"}, behave="submit", polls=0))
    key = _claim(sched, clock, at=T0 + HOUR)
    sched.execute(key)
    sched.register(spec("r1", {"cron": "0 * * * *"}, behave="submit", polls=0, v=2))
    clock.set(T0 + HOUR + MINUTE)
    done = sched.collect(key)
    assert (done.state, done.reason, done.cost_micros) == ("failed", "config_revision_changed", 5)
    assert runner.deliveries == []


def test_two_collectors_one_delivery(make, clock, runner, store) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "0 * * * *"}, behave="submit", polls=0))
    key = _claim(sched, clock, at=T0 + HOUR)
    sched.execute(key)
    clock.set(T0 + HOUR + MINUTE)
    sched.tick()  # poll_attempts = 1
    rival = store.begin_collecting(key, now=clock())  # another collector won the CAS
    assert rival.won
    assert sched.collect(key).state == "collecting"  # not submitted: nothing to do
    assert runner.deliveries == []


def test_collect_of_a_run_that_is_not_submitted_does_nothing(make, clock, runner) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    key = _claim(sched, clock)
    assert sched.collect(key).state == "claimed"
    assert runner.collects == []


@every_store
def test_record_is_the_operators_reconciliation(make, clock, runner) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    key = _claim(sched, clock)
    sched.store.start(key, now=clock())  # a worker started it and vanished
    with pytest.raises(InvalidInput):
        sched.record(SCOPE, "r1", key.run_id, "running", "operator")
    with pytest.raises(InvalidInput):
        sched.record(SCOPE, "r1", key.run_id, "failed", "because I said so")
    res = sched.record(SCOPE, "r1", key.run_id, "failed", "reconciled")
    assert res.won
    assert (res.record.state, res.record.reason) == ("failed", "reconciled")
    assert sched.get(SCOPE, "r1").consecutive_failures == 0  # record never touches the streak
    clock.set(T0 + HOUR)
    sched.tick()
    assert key.run_id not in [k.run_id for k in (disp.runs[1:])]  # never re-sent
    assert not sched.record(SCOPE, "r1", key.run_id, "completed", "operator").won


@every_store
def test_the_handle(make, clock, store, runner) -> None:
    seen: dict[str, object] = {}

    def on_run(routine: Routine, handle: RunHandle) -> None:
        assert isinstance(handle, RunHandle)
        seen["changed"] = handle.config_changed
        seen["last_hash"] = handle.last_delivery_hash()
        res = handle.reserve(300, [Ceiling("org:org-a", 1000)])
        seen["reserve"] = (res.ok, res.record.reserve_day if res.record else None)
        seen["over"] = handle.reserve(800, [Ceiling("org:org-a", 1000)]).ok
        handle.annotate(session_id="s-1", result_text="hello")
        seen["session"] = handle.result().session_id

    runner.on_run = on_run
    sched = make(dispatcher=RecordingDispatcher(), money_day_tz="America/New_York")
    sched.register(spec("r1", {"cron": "0 3 * * *"}, cost=250))
    key = _claim(sched, clock, at=T0.replace(hour=3) + 1 * 86400 * timedelta(seconds=1))
    done = sched.execute(key)
    assert seen["changed"] is False
    assert seen["last_hash"] is None
    assert seen["reserve"] == (True, "2026-03-02")  # 03:00 UTC on the 3rd is still the 2nd in New York
    assert seen["over"] is False  # one reservation per run
    assert seen["session"] == "s-1"
    assert (done.state, done.cost_micros, done.reserved_micros) == ("completed", 250, 0)
    assert store.spend("org:org-a", "2026-03-02") == 250  # settled to the cost
    assert done.erase_at == clock() + sched.settings.result_retention


def test_runresult_reason_defaults(make, clock, runner) -> None:
    def on_run(routine, handle):
        raise RuntimeError("x")

    assert RunResult.completed().reason == "ok"
    runner.on_run = on_run
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    assert sched.execute(_claim(sched, clock)).error_class == "RuntimeError"
