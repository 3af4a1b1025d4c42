"""Overlap ``latest`` through the engine: decide marks the fire, the tick buffers it, the end of the active
run releases it and the engine sends it right after that commit; a failed send is re-sent by a tick."""

from __future__ import annotations

from engine_support import MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.engine.decide import decide
from alma_schedule.model import Fire, RunKey
from alma_schedule.settings import Settings
from alma_schedule.testing.builders import make_routine

LATEST = {"cron": "*/5 * * * *", "overlap": "latest"}


def _ledger(sched, routine_id="r1"):
    rows = sched.runs(SCOPE, routine_id=routine_id, limit=1000)
    return sorted((r.run_id, r.state, r.reason) for r in rows)


def _busy(make, clock):
    """A latest routine whose 08:05 fire is ``submitted`` (the routine is busy), on a recording dispatcher."""
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", LATEST, behave="submit", polls=99))
    clock.set(T0 + 5 * MINUTE)
    first = sched.tick().claimed[0]
    sched.execute(first)
    return disp, sched, first


def test_decide_marks_the_fire_of_a_latest_routine() -> None:
    settings = Settings()
    now = make_routine(schedule=LATEST).registered_at + 10 * MINUTE
    latest = decide(make_routine(schedule=LATEST), now, settings)
    plain = decide(make_routine(schedule={"cron": "*/5 * * * *"}), now, settings)
    assert isinstance(latest, Fire) and isinstance(plain, Fire)
    assert latest.buffer and not plain.buffer


@every_store
def test_a_submitted_run_buffers_the_latest_fire_and_its_end_runs_it(make, clock, runner) -> None:
    disp, sched, first = _busy(make, clock)
    for minutes in (10, 15):
        clock.set(T0 + minutes * MINUTE)
        report = sched.tick()
        assert report.claimed == () and [k.run_id for k in report.buffered] == [f"2026-03-02T08:{minutes}:00Z"]
        assert report.to_dict()["buffered"] == 1
    assert _ledger(sched) == [
        ("2026-03-02T08:05:00Z", "submitted", None),
        ("2026-03-02T08:10:00Z", "skipped", "overlap"),  # replaced by the newer fire
        ("2026-03-02T08:15:00Z", "buffered", None),
    ]
    sent = len(disp.runs)
    clock.set(T0 + 16 * MINUTE)
    result = sched.record(SCOPE, "r1", first.run_id, "failed", "operator")
    assert result.won and result.released is not None and result.released.run_id == "2026-03-02T08:15:00Z"
    assert [r.run_id for r in disp.runs[sent:]] == ["2026-03-02T08:15:00Z"]  # sent after the commit
    assert sched.execute(result.released.key).state == "submitted"
    assert runner.ran() == ["2026-03-02T08:05:00Z", "2026-03-02T08:15:00Z"]


def test_plan_says_the_fire_would_wait_buffered(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", LATEST, behave="submit", polls=99))
    clock.set(T0 + 5 * MINUTE)
    sched.execute(sched.tick().claimed[0])
    clock.set(T0 + 10 * MINUTE)
    [planned] = sched.plan().due
    assert planned.action == "buffer" and "08:05:00Z" in planned.why


def test_a_finish_sends_the_released_fire_in_process(make, clock, runner) -> None:
    """In-process (the dispatcher runs what it is sent): the buffered fire runs right after the slow one."""
    sched = make()
    sched.register(spec("r1", LATEST))
    busy = {"once": True}

    def slow(routine, handle) -> None:  # the first run lasts past two fires; a tick comes meanwhile
        if busy.pop("once", False):
            for minutes in (10, 15):
                clock.set(T0 + minutes * MINUTE)
                assert sched.tick().claimed == ()

    runner.on_run = slow
    clock.set(T0 + 5 * MINUTE)
    sched.tick()
    assert runner.ran() == ["2026-03-02T08:05:00Z", "2026-03-02T08:15:00Z"]
    assert _ledger(sched) == [
        ("2026-03-02T08:05:00Z", "completed", "ok"),
        ("2026-03-02T08:10:00Z", "skipped", "overlap"),
        ("2026-03-02T08:15:00Z", "completed", "ok"),
    ]


def test_a_failed_send_of_the_released_fire_is_resent_by_a_tick(make, clock, runner) -> None:
    disp, sched, first = _busy(make, clock)
    clock.set(T0 + 10 * MINUTE)
    sched.tick()
    disp.fail = True
    result = sched.record(SCOPE, "r1", first.run_id, "failed", "operator")  # the send fails: logged only
    assert result.won and result.released is not None
    disp.fail = False
    sent = len(disp.runs)
    clock.set(result.released.resend_at or T0)
    report = sched.tick()
    assert [k.run_id for k in report.resent] == ["2026-03-02T08:10:00Z"]
    assert [r.run_id for r in disp.runs[sent:]] == ["2026-03-02T08:10:00Z"]
    key = RunKey.of(SCOPE, "r1", "2026-03-02T08:10:00Z")
    assert sched.execute(key).state == "submitted"
