"""The "did not run" alarm through the engine: ``expect`` refused when it cannot work, an overdue fire
named by the tick report while it lasts, cleared by a success; a paused routine raises nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from engine_support import MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.errors import RegistrationRefused

SECOND = timedelta(seconds=1)


def tick_at(sched, clock, at):
    clock.set(at)
    return sched.tick()


@pytest.mark.parametrize(
    ("schedule", "words"),
    [
        ({"every": "1m", "expect": "2m"}, "'expect' 2m is longer than the schedule's interval (1m)"),
        ({"cron": "*/5 * * * *", "expect": "6m"}, "'expect' 6m is longer than the schedule's interval (5m)"),
        ({"cron": "0 9 * * 1-5", "expect": "2d"}, "'expect' 2d is longer than the schedule's interval (1d)"),
        ({"every": "1h", "expect": "5s"}, "'expect' 5s is shorter than hint_poll (10s)"),
        ({"every": "1h", "expect": "soon"}, "'expect'"),
    ],
)
def test_a_bad_expect_is_refused_naming_the_field_and_nothing_is_written(make, schedule, words) -> None:
    sched = make(hint_poll=timedelta(seconds=10))
    with pytest.raises(RegistrationRefused) as err:
        sched.register(spec("r1", schedule))
    assert words in str(err.value) and "\n" not in str(err.value)
    assert sched.routines(SCOPE) == []


def test_a_good_expect_is_stored_in_its_canonical_text(make) -> None:
    sched = make()
    sched.register(spec("r1", {"every": "1m", "expect": "60s"}))  # equal to the interval: accepted
    sched.register(spec("r2", {"at": "2026-03-03T09:00:00+00:00", "expect": "3d"}))  # once: no interval
    assert sched.get(SCOPE, "r1").schedule == {"every": "1m", "expect": "1m"}


@every_store
def test_an_unrun_fire_is_named_every_tick_until_a_run_succeeds(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())  # nothing runs: the workers are stopped
    sched.register(spec("r1", {"every": "1m", "expect": "30s"}, behave="ok"))
    first = sched.get(SCOPE, "r1").next_due_at
    clock.set(first)
    [claimed] = sched.tick().claimed
    assert tick_at(sched, clock, first + 15 * SECOND).overdue == ()
    report = tick_at(sched, clock, first + 30 * SECOND)
    [fire] = report.overdue
    assert (fire.fire_at, fire.run_id, fire.state) == (first, claimed.run_id, "claimed")
    assert report.to_dict()["overdue"] == 1 and report.to_dict()["ids"]["overdue"] == [fire.key]
    assert [f.fire_at for f in tick_at(sched, clock, first + 45 * SECOND).overdue] == [first]  # while it lasts
    clock.set(first + MINUTE)
    [nxt] = sched.tick().claimed
    rec = sched.execute(nxt)
    assert rec.state == "completed"
    assert tick_at(sched, clock, first + MINUTE + 15 * SECOND).overdue == ()  # a run succeeded: cleared


@every_store
def test_a_routine_paused_over_its_fire_raises_nothing(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"every": "1m", "expect": "30s"}, behave="ok"))
    first = sched.get(SCOPE, "r1").next_due_at
    clock.set(first - SECOND)
    sched.pause(SCOPE, "r1", "maintenance")
    for at in (first + 30 * SECOND, first + 5 * MINUTE):
        assert tick_at(sched, clock, at).overdue == ()
    clock.set(first + 5 * MINUTE + 10 * SECOND)
    sched.resume(SCOPE, "r1")
    assert tick_at(sched, clock, first + 5 * MINUTE + 20 * SECOND).overdue == ()


def test_t0_is_a_monday_morning() -> None:
    assert T0.weekday() == 0
