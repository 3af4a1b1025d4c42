"""The levers: disable / enable, pause / resume, delete, trigger; scope isolation; the clock clamp."""

from __future__ import annotations

import pytest
from engine_support import DAY, HOUR, MINUTE, OTHER, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.errors import NotFound, Overlap, Refused


def _ledger(sched, routine_id="r1"):
    return sorted((r.run_id, r.state, r.reason) for r in sched.runs(SCOPE, routine_id=routine_id, limit=1000))


@every_store
def test_disable_then_enable_restarts_the_cursor_and_replays_nothing(make, clock, runner) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "0 * * * *"}))
    clock.set(T0 + HOUR)
    assert [k.run_id for k in sched.tick().claimed] == ["2026-03-02T09:00:00Z"]
    off = sched.disable(SCOPE, "r1")
    assert (off.enabled, off.next_due_at) == (False, None)
    clock.set(T0 + 3 * HOUR + 30 * MINUTE)
    assert sched.tick().claimed == ()  # 10:00 and 11:00 pass while disabled
    on = sched.enable(SCOPE, "r1")
    assert (on.enabled, on.last_fire, on.next_due_at) == (True, clock(), T0 + 4 * HOUR)
    assert sched.tick().claimed == ()  # 11:00 is before the restart: never replayed
    clock.set(T0 + 4 * HOUR)
    assert [k.run_id for k in sched.tick().claimed] == ["2026-03-02T12:00:00Z"]
    assert runner.ran() == ["2026-03-02T09:00:00Z", "2026-03-02T12:00:00Z"]


@every_store
def test_pause_keeps_the_first_reason_and_resume_resets_the_streak(make, clock, store) -> None:
    sched = make(failure_threshold=0)
    sched.register(spec("r1", {"cron": "*/10 * * * *"}, behave="fail"))
    for minutes in (10, 20):
        clock.set(T0 + minutes * MINUTE)
        sched.tick()
    assert sched.get(SCOPE, "r1").consecutive_failures == 2
    first = sched.pause(SCOPE, "r1", "maintenance")
    assert (first.paused_reason, first.next_due_at) == ("maintenance", None)
    assert sched.pause(SCOPE, "r1", "other").paused_reason == "maintenance"
    clock.set(T0 + 45 * MINUTE)
    assert sched.tick().claimed == ()
    resumed = sched.resume(SCOPE, "r1")
    assert resumed.paused_reason is None
    assert resumed.consecutive_failures == 0
    assert (resumed.last_fire, resumed.next_due_at) == (T0 + 45 * MINUTE, T0 + 50 * MINUTE)
    assert sched.plan().due == ()  # 40 was missed while paused: not replayed


def test_enable_while_paused_stays_off_the_index(make) -> None:
    sched = make()
    sched.register(spec("r1"))
    sched.pause(SCOPE, "r1")
    sched.disable(SCOPE, "r1")
    on = sched.enable(SCOPE, "r1")
    assert (on.enabled, on.paused_reason, on.next_due_at) == (True, "manual", None)


@every_store
def test_delete_tombstones_and_a_tick_purges(make, clock, store) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    clock.set(T0 + 5 * MINUTE)
    sched.tick()
    gone = sched.delete(SCOPE, "r1")
    assert gone.deleted_at == clock()
    assert sched.delete(SCOPE, "r1").deleted_at == gone.deleted_at  # idempotent
    with pytest.raises(NotFound):
        sched.get(SCOPE, "r1")
    with pytest.raises(Refused) as err:
        sched.trigger(SCOPE, "r1")
    assert err.value.reason == "deleted"
    clock.set(T0 + 10 * MINUTE)
    assert sched.tick().claimed == ()
    assert store.get_routine(SCOPE, "r1", include_deleted=True) is None  # purged by the tick


def test_trigger_runs_a_manual_fire_and_never_moves_the_cursor(make, clock, runner) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    before = sched.get(SCOPE, "r1")
    record = sched.trigger(SCOPE, "r1")
    assert record.run_id.startswith("manual:")
    assert (record.origin, record.state, record.expires_at) == ("manual", "claimed", T0 + HOUR)
    assert sched.run(SCOPE, "r1", record.run_id).state == "completed"  # in-process dispatch ran it
    assert runner.ran() == [record.run_id]
    after = sched.get(SCOPE, "r1")
    assert (after.last_fire, after.next_due_at) == (before.last_fire, before.next_due_at)


@every_store
def test_trigger_refusals(make, clock) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1"))
    pending = sched.trigger(SCOPE, "r1")
    with pytest.raises(Overlap) as err:
        sched.trigger(SCOPE, "r1")
    assert err.value.record.run_id == pending.run_id
    sched.execute(pending.key)
    sched.pause(SCOPE, "r1")
    with pytest.raises(Refused) as paused:
        sched.trigger(SCOPE, "r1")
    assert paused.value.reason == "paused"
    sched.resume(SCOPE, "r1")
    sched.disable(SCOPE, "r1")
    with pytest.raises(Refused) as disabled:
        sched.trigger(SCOPE, "r1")
    assert disabled.value.reason == "disabled"
    with pytest.raises(NotFound):
        sched.trigger(SCOPE, "nope")


def test_trigger_overlaps_an_active_submitted_run(make, clock) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "*/5 * * * *"}, behave="submit"))
    clock.set(T0 + 5 * MINUTE)
    sched.tick()
    with pytest.raises(Overlap) as err:
        sched.trigger(SCOPE, "r1")
    assert (err.value.record.run_id, err.value.record.state) == ("2026-03-02T08:05:00Z", "submitted")


def test_trigger_whose_dispatch_fails_is_resent_by_a_tick(make, clock, runner) -> None:
    disp = RecordingDispatcher()
    disp.fail = True
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    record = sched.trigger(SCOPE, "r1")  # never silently dropped: the row is claimed
    disp.fail = False
    clock.set(T0 + 2 * MINUTE)
    report = sched.tick()
    assert [k.run_id for k in report.resent] == [record.run_id]
    sched.execute(disp.runs[0].key)
    sched.execute(disp.runs[0].key)
    assert runner.ran() == [record.run_id]


def test_levers_reach_nothing_outside_their_scope(make) -> None:
    sched = make()
    sched.register(spec("r1"))
    for lever in (sched.disable, sched.enable, sched.pause, sched.resume, sched.get):
        with pytest.raises(NotFound):
            lever(OTHER, "r1")
    assert sched.routines(OTHER) == []
    assert [r.routine_id for r in sched.routines(SCOPE)] == ["r1"]


def test_clock_ahead_levers_restart_at_the_clock(make) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    sched.pause(SCOPE, "r1")
    resumed = sched.resume(SCOPE, "r1", now=T0 + 365 * DAY)
    assert resumed.last_fire == T0 + sched.settings.clock_tolerance
    assert resumed.next_due_at == T0.replace(hour=9)
