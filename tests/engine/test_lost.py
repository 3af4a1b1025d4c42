"""Celery's loss report applied by the engine (``Scheduler.report_lost``), on every store.

The owner of each run is written by its start CAS; a report for one request id touches exactly the
``running`` runs it owns: an untracked ``task`` run ends ``failed(worker_lost)`` (no streak), so the
routine's next fire runs; every other run is blocked at once with the report's why and stays
``running`` for the operator. (The real Celery reports, from a SIGKILLed pool child and a hard time
limit, are in ``tests/celery/test_killed_runs.py``.)
"""

from __future__ import annotations

import pytest
from engine_support import MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.engine import Scheduler
from alma_schedule.errors import InvalidInput
from alma_schedule.model import RunKey
from alma_schedule.model.time import SettableTime
from alma_schedule.policies.ownership import owner_of

REQUEST = "3b5f0c3e-6b1d-4d93-8f55-0c7b2d4a9e10"
EVERY_5 = {"cron": "*/5 * * * *"}


def _started(sched: Scheduler, clock: SettableTime, routine_id: str, owner: str | None) -> RunKey:
    disp = sched.dispatcher
    assert isinstance(disp, RecordingDispatcher)
    n = len(disp.runs)
    sched.tick()
    key = next(r.key for r in disp.runs[n:] if r.routine_id == routine_id)
    assert sched.store.start(key, now=clock(), owner=owner).won
    return key


@every_store
def test_an_untracked_task_run_reported_lost_fails_worker_lost_and_the_next_fire_runs(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher(), failure_threshold=1)
    sched.register(spec("send", EVERY_5, kind="task", task="fleet.send"))
    clock.set(T0 + 5 * MINUTE)
    key = _started(sched, clock, "send", REQUEST)

    report = sched.report_lost(REQUEST, "worker_lost")
    assert (report.failed, report.blocked, report.errors) == ((key,), (), 0)
    rec = sched.store.get(key)
    assert rec is not None
    assert (rec.state, rec.reason, rec.error_class, rec.owner) == ("failed", "worker_lost", "WorkerLostError", REQUEST)
    routine = sched.get(SCOPE, "send")
    assert (routine.consecutive_failures, routine.paused_reason) == (0, None)  # no verdict: threshold 1 not hit

    clock.set(T0 + 10 * MINUTE)
    nxt = sched.tick()
    assert [k.routine_id for k in nxt.claimed] == ["send"] and not nxt.blocked
    assert sched.report_lost(REQUEST, "worker_lost").failed == ()  # the fire is never re-run, nor re-failed
    again = sched.store.get(key)
    assert again is not None and again.state == "failed"


@every_store
@pytest.mark.parametrize("why", ["worker_lost", "time_limit"])
@pytest.mark.parametrize(
    ("kind", "definition"),
    [("task", {"task": "fleet.build", "track": True, "deadline": "1h"}), ("turn", {}), ("job", {}), ("script", {})],
)
def test_every_other_run_is_blocked_at_once_and_stays_running(make, clock, why, kind, definition) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", EVERY_5, kind=kind, **definition))
    clock.set(T0 + 5 * MINUTE)
    key = _started(sched, clock, "r1", REQUEST)

    report = sched.report_lost(REQUEST, why)
    assert (report.failed, report.blocked) == ((), (key,))
    rec = sched.store.get(key)
    assert rec is not None and (rec.state, rec.blocked_why, rec.blocked_at) == ("running", why, clock())
    tick = sched.tick()  # blocked at once: no 2 x run_time_limit wait
    assert tick.blocked == (key,) and tick.blocked_why == (why,)
    clock.set(T0 + 10 * MINUTE)
    assert [k for k in sched.tick().skipped if k.routine_id == "r1"]  # the routine waits: overlap
    done = sched.record(SCOPE, "r1", key.run_id, "failed", "runner_error")
    assert done.won and sched.tick().blocked == ()


@every_store
def test_a_report_touches_only_the_runs_of_its_request(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    for rid in ("p1", "p2", "other", "nobody"):
        sched.register(spec(rid, EVERY_5))
    clock.set(T0 + 5 * MINUTE)
    disp = sched.dispatcher
    sched.tick()
    keys = {r.routine_id: r.key for r in disp.runs}
    store = sched.store
    assert store.start(keys["p1"], now=clock(), owner=owner_of(REQUEST, keys["p1"])).won  # packed
    assert store.start(keys["p2"], now=clock(), owner=owner_of(REQUEST, keys["p2"])).won
    assert store.start(keys["other"], now=clock(), owner="another-request").won
    assert store.start(keys["nobody"], now=clock()).won

    report = sched.report_lost(REQUEST, "worker_lost")
    assert set(report.blocked) == {keys["p1"], keys["p2"]}
    for rid, marked in (("p1", True), ("p2", True), ("other", False), ("nobody", False)):
        rec = store.get(keys[rid])
        assert rec is not None and rec.state == "running" and (rec.blocked_why is not None) == marked
    assert sched.report_lost("no-such-request", "time_limit").blocked == ()


def test_a_run_that_finished_meanwhile_is_left_alone(make, clock, runner) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", EVERY_5))
    clock.set(T0 + 5 * MINUTE)
    sched.tick()
    (sent,) = sched.dispatcher.runs
    done = sched.execute(sent.key, owner=REQUEST)
    assert done.state == "completed" and done.owner == REQUEST
    report = sched.report_lost(REQUEST, "worker_lost")
    assert report.failed == report.blocked == ()
    rec = sched.store.get(sent.key)
    assert rec is not None and rec.blocked_why is None


@pytest.mark.parametrize(("request_id", "why"), [("", "worker_lost"), (REQUEST, "uncertain_outcome"), (REQUEST, "x")])
def test_a_bad_report_is_refused(make, request_id, why) -> None:
    with pytest.raises(InvalidInput):
        make().report_lost(request_id, why)
