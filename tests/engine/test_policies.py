"""The schedule policies through the engine (issue 15): ``catch_up``, ``not_before`` / ``not_after``,
``max_runs``, and the ``finished`` reading with the trigger refusal."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from engine_support import DAY, HOUR, MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.errors import Finished, RegistrationRefused
from alma_schedule.policies.finished import finished_reason, routine_state


def _iso(at: datetime) -> str:
    return at.isoformat()


def _runs(sched, rid="r1"):
    return sorted(sched.runs(SCOPE, routine_id=rid, limit=1000), key=lambda r: r.fire_at)


# ------------------------------------------------------------------------------ catch_up


@every_store
def test_catch_up_skips_a_fire_older_than_its_window(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "0 * * * *", "catch_up": "10m"}))
    clock.set(T0 + HOUR + 5 * MINUTE)  # 09:05: the 09:00 fire is 5 minutes old
    [claimed] = sched.tick().claimed
    rec = sched.run(SCOPE, "r1", claimed.run_id)
    assert (rec.state, rec.expires_at) == ("claimed", T0 + HOUR + 10 * MINUTE), "the message expires with the window"
    clock.set(T0 + 2 * HOUR + 11 * MINUTE)  # 10:11: the 10:00 fire is 11 minutes old when first seen
    report = sched.tick()
    assert report.claimed == ()
    late = sched.run(SCOPE, "r1", "2026-03-02T10:00:00Z")
    assert (late.state, late.reason) == ("skipped", "missed")
    assert sched.get(SCOPE, "r1").next_due_at == T0 + 3 * HOUR


def test_without_catch_up_a_fire_is_eligible_until_the_next(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "0 * * * *"}))
    clock.set(T0 + HOUR + 59 * MINUTE)
    [claimed] = sched.tick().claimed
    assert sched.run(SCOPE, "r1", claimed.run_id).expires_at == T0 + 2 * HOUR


def test_max_catch_up_caps_catch_up(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher(), max_catch_up=timedelta(minutes=5))
    sched.register(spec("r1", {"cron": "0 * * * *", "catch_up": "30m"}))
    clock.set(T0 + HOUR + 6 * MINUTE)
    assert sched.tick().claimed == ()
    assert sched.run(SCOPE, "r1", "2026-03-02T09:00:00Z").reason == "missed"


def test_catch_up_shorter_than_the_hint_poll_and_tolerance_is_refused_naming_both_settings(make) -> None:
    sched = make(hint_poll=timedelta(seconds=10), clock_tolerance=timedelta(seconds=5))
    with pytest.raises(RegistrationRefused) as err:
        sched.register(spec("r1", {"every": "1h", "catch_up": "14s"}))
    text = str(err.value)
    assert "'catch_up' 14s" in text and "hint_poll (10s)" in text and "clock_tolerance (5s)" in text
    assert "\n" not in text
    assert sched.routines(SCOPE) == [], "nothing is half-written"
    sched.register(spec("r1", {"every": "1h", "catch_up": "15s"}))  # exactly poll + tolerance: accepted


def test_catch_up_shorter_than_the_tick_period_is_accepted_the_clock_follows_the_hint(make) -> None:
    sched = make(tick_period=timedelta(minutes=1), clock_tolerance=timedelta(seconds=2))
    sched.register(spec("r1", {"every": "1h", "catch_up": "5s"}))  # 1 s poll + 2 s tolerance <= 5 s
    assert [r.routine_id for r in sched.routines(SCOPE)] == ["r1"]


# ------------------------------------------------------------------------------ bounds


@every_store
def test_not_before_skips_to_the_first_fire_in_the_bounds_anchored_on_registration(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    bound = T0 + 3 * HOUR + 30 * MINUTE  # 11:30; every 1h from 08:00 fires at :00
    receipt = sched.register(spec("r1", {"every": "1h", "not_before": _iso(bound)}))
    assert receipt.routine.next_due_at == T0 + 4 * HOUR, "anchored on registered_at, not on the bound"
    assert receipt.next_fires == (T0 + 4 * HOUR, T0 + 5 * HOUR, T0 + 6 * HOUR)
    for h in range(1, 4):
        clock.set(T0 + h * HOUR)
        assert sched.tick().claimed == ()
    assert _runs(sched) == [], "fires before not_before get no row"
    clock.set(T0 + 4 * HOUR)
    assert [k.run_id for k in sched.tick().claimed] == ["2026-03-02T12:00:00Z"]


@every_store
def test_not_after_is_inclusive_then_the_routine_is_finished(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    start, end = T0 + HOUR, T0 + 3 * HOUR
    receipt = sched.register(spec("r1", {"every": "1h", "not_before": _iso(start), "not_after": _iso(end)}))
    assert receipt.next_fires == (start, T0 + 2 * HOUR, end), "both bounds inclusive"
    claimed = []
    for h in range(1, 7):
        clock.set(T0 + h * HOUR)
        claimed += [k.run_id for k in sched.tick().claimed]
    assert claimed == ["2026-03-02T09:00:00Z", "2026-03-02T10:00:00Z", "2026-03-02T11:00:00Z"]
    assert len(_runs(sched)) == 3, "no row past not_after"
    routine = sched.get(SCOPE, "r1")
    assert routine.next_due_at is None
    assert finished_reason(routine, clock()) == "not_after" and routine_state(routine, clock()) == "finished"
    with pytest.raises(Finished) as err:
        sched.trigger(SCOPE, "r1")
    assert "not_after" in str(err.value) and err.value.reason == "not_after"
    assert len(_runs(sched)) == 3, "the refused trigger wrote nothing"


def test_at_not_after_itself_the_routine_is_not_finished_yet(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    end = T0 + 2 * HOUR
    sched.register(spec("r1", {"every": "1h", "not_after": _iso(end)}))
    routine = sched.get(SCOPE, "r1")
    assert finished_reason(routine, end) is None
    assert finished_reason(routine, end + timedelta(seconds=1)) == "not_after"


def test_a_bounds_change_re_derives_the_index(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"every": "1h"}))
    assert sched.get(SCOPE, "r1").next_due_at == T0 + HOUR
    later = T0 + 5 * HOUR
    receipt = sched.register(spec("r1", {"every": "1h", "not_before": _iso(later)}))
    assert receipt.routine.next_due_at == later and receipt.routine.registered_at == T0
    sched.register(spec("r1", {"every": "1h", "not_after": _iso(T0 + 30 * MINUTE)}))
    assert sched.get(SCOPE, "r1").next_due_at is None


def test_resume_and_enable_respect_the_bounds(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"every": "1h", "not_before": _iso(T0 + DAY)}))
    sched.pause(SCOPE, "r1")
    clock.set(T0 + 2 * HOUR)
    assert sched.resume(SCOPE, "r1").next_due_at == T0 + DAY
    sched.disable(SCOPE, "r1")
    assert sched.enable(SCOPE, "r1").next_due_at == T0 + DAY


def test_reindex_respects_the_bounds(make, clock, store) -> None:
    import dataclasses

    sched = make(dispatcher=RecordingDispatcher())
    routine = sched.register(spec("r1", {"every": "1h", "not_before": _iso(T0 + DAY)})).routine
    stale = dataclasses.replace(routine, next_due_at=T0 + HOUR)
    store.put_routine(stale, now=T0, expected_revision=routine.config_revision)
    sched.reindex()
    assert sched.get(SCOPE, "r1").next_due_at == T0 + DAY


# ------------------------------------------------------------------------------ max_runs


@every_store
def test_max_runs_starts_that_many_then_finishes(make, clock) -> None:
    sched = make()  # in-process: each fire runs and completes
    receipt = sched.register(spec("r1", {"every": "1h", "max_runs": 2}))
    assert len(receipt.next_fires) == 2, "the preview shows no more fires than max_runs allows"
    sched.trigger(SCOPE, "r1")  # a manual run does not count
    for h in range(1, 6):
        clock.set(T0 + h * HOUR)
        sched.tick()
    schedule = [r for r in _runs(sched) if r.origin == "schedule"]
    assert [(r.run_id, r.state) for r in schedule] == [
        ("2026-03-02T09:00:00Z", "completed"),
        ("2026-03-02T10:00:00Z", "completed"),
    ]
    routine = sched.get(SCOPE, "r1")
    assert (routine.schedule_starts, routine.schedule_claims, routine.next_due_at) == (2, 2, None)
    assert routine_state(routine, clock()) == "finished" and finished_reason(routine, clock()) == "max_runs"
    assert sched.trigger(SCOPE, "r1").origin == "manual", "a finished-by-max_runs routine may still run by hand"
    assert sched.get(SCOPE, "r1").schedule_starts == 2


@every_store
def test_max_runs_counts_starts_so_claims_made_while_the_workers_are_down_give_their_slots_back(make, clock) -> None:
    """Issue 45, item 13: with the workers down, ``max_runs: 2`` finished a routine with zero executions
    (two claims superseded and expired). Starts count, as Temporal counts actions started."""
    sched = make(dispatcher=RecordingDispatcher())  # the workers are down: nothing starts
    sched.register(spec("r1", {"every": "1h", "max_runs": 2}))
    for h in range(1, 4):  # three fires claimed, each superseded or expired, none started
        clock.set(T0 + h * HOUR)
        sched.tick()
    routine = sched.get(SCOPE, "r1")
    assert (routine.schedule_claims, routine.schedule_starts) == (3, 0)
    assert finished_reason(routine, clock()) is None and routine.next_due_at == T0 + 4 * HOUR
    up = make()  # the workers are back: each fire runs
    for h in range(4, 8):
        clock.set(T0 + h * HOUR)
        up.tick()
    ran = [r.run_id for r in _runs(up) if r.started_at is not None]
    assert ran == ["2026-03-02T12:00:00Z", "2026-03-02T13:00:00Z"], "exactly max_runs executions"
    routine = up.get(SCOPE, "r1")
    assert (routine.schedule_starts, routine.next_due_at) == (2, None)
    assert finished_reason(routine, clock()) == "max_runs"


@every_store
def test_re_registration_raises_max_runs_and_keeps_the_count(make, clock) -> None:
    sched = make()
    sched.register(spec("r1", {"every": "1h", "max_runs": 1}))
    clock.set(T0 + HOUR)
    sched.tick()
    assert sched.get(SCOPE, "r1").next_due_at is None
    clock.set(T0 + HOUR + 10 * MINUTE)
    receipt = sched.register(spec("r1", {"every": "1h", "max_runs": 3}))
    assert receipt.routine.schedule_starts == 1 and receipt.routine.next_due_at == T0 + 2 * HOUR
    assert len(receipt.next_fires) == 2
    for h in range(2, 8):
        clock.set(T0 + h * HOUR)
        sched.tick()
    assert sched.get(SCOPE, "r1").schedule_starts == 3
    assert len([r for r in _runs(sched) if r.origin == "schedule"]) == 3
    sched.register(spec("r1", {"every": "1h", "max_runs": 2}))  # lowered below the count: stays finished
    assert sched.get(SCOPE, "r1").next_due_at is None
    clock.set(T0 + 7 * HOUR + 10 * MINUTE)
    unlimited = sched.register(spec("r1", {"every": "1h"})).routine  # the limit removed: due again,
    assert unlimited.next_due_at == T0 + 4 * HOUR and unlimited.schedule_starts == 3  # from the cursor
    assert [k.run_id for k in sched.tick().claimed] == ["2026-03-02T15:00:00Z"], "the latest fire only"


def test_one_off_is_max_runs_one(make, clock) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "*/5 * * * *", "max_runs": 1}))
    for m in range(0, 60, 5):
        clock.set(T0 + m * MINUTE)
        sched.tick()
    assert [r.run_id for r in _runs(sched)] == ["2026-03-02T08:00:00Z"]


def test_an_at_that_fired_reads_exhausted(make, clock) -> None:
    sched = make()
    sched.register(spec("r1", {"at": _iso(T0 + HOUR)}))
    assert finished_reason(sched.get(SCOPE, "r1"), clock()) is None
    clock.set(T0 + HOUR)
    sched.tick()
    routine = sched.get(SCOPE, "r1")
    assert finished_reason(routine, clock()) == "exhausted" and routine_state(routine, clock()) == "finished"
    assert sched.trigger(SCOPE, "r1").origin == "manual"
