"""plan: what a tick would do and why, written nowhere."""

from __future__ import annotations

from datetime import timedelta

from engine_support import HOUR, MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.model import Routine, TickPlan


def _snapshot(sched, store):
    routines = sorted(str(r.to_dict()) for r in sched.routines(SCOPE, include_deleted=True))
    runs = sorted(str(r.to_dict()) for r in sched.runs(SCOPE, limit=1000))
    return routines, runs, store.last_tick()


@every_store
def test_plan_says_what_and_why_and_writes_nothing(make, clock, store) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp, max_catch_up=timedelta(minutes=30))
    sched.register(spec("due", {"cron": "0 * * * *"}))
    sched.register(spec("busy", {"cron": "0 * * * *"}, behave="submit", polls=99))
    sched.register(spec("lost", {"cron": "*/20 * * * *"}))
    sched.register(spec("late", {"cron": "50 9 * * *"}))
    sched.register(spec("off", {"cron": "0 * * * *"}))
    sched.register(spec("held", {"cron": "0 * * * *"}))
    store.put_routine(
        Routine(SCOPE.org, SCOPE.uid, "bad", "script", {"cron": "bad"}, {}, T0, "rev", next_due_at=T0), now=T0
    )
    clock.set(T0 + 20 * MINUTE)
    sched.tick()  # "lost" claims 08:20 and its message is lost
    clock.set(T0 + HOUR)
    sched.tick()
    assert sched.execute([r.key for r in disp.runs if r.routine_id == "busy"][-1]).state == "submitted"
    sched.disable(SCOPE, "off")
    sched.pause(SCOPE, "held", "quota")
    before = _snapshot(sched, store)

    plan = sched.plan(now=T0 + 2 * HOUR + 25 * MINUTE)  # 10:25
    assert isinstance(plan, TickPlan)
    assert _snapshot(sched, store) == before
    due = {(p.routine_id, p.action): p for p in plan.due}
    assert set(due) == {
        ("due", "claim"),
        ("busy", "skip:overlap"),
        ("lost", "claim"),
        ("late", "skip:missed"),
    }
    assert due[("due", "claim")].run_id == "2026-03-02T10:00:00Z"
    assert due[("lost", "claim")].run_id == "2026-03-02T10:20:00Z"
    assert "supersedes claimed 2026-03-02T09:00:00Z" in due[("lost", "claim")].why
    why = {p.routine_id: p.why for p in plan.skipped}
    assert why["busy"] == "overlap with run 2026-03-02T09:00:00Z (submitted)"
    assert why["late"].startswith("missed: fire 2026-03-02T09:50:00Z")  # 35 minutes old > max_catch_up
    assert why["bad"].startswith("deferred until ") and "InvalidSchedule" in why["bad"]
    assert {(p.routine_id, p.why) for p in plan.inactive} == {("off", "disabled"), ("held", "paused: quota")}
    assert [p["collect_run_id"] for p in plan.polls] == ["2026-03-02T09:00:00Z"]
    assert plan.to_dict()["at"] == "2026-03-02T10:25:00+00:00"


def test_plan_may_look_at_any_instant(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    far = T0 + timedelta(days=400)  # 2027-04-06 08:00: the latest fire is the day before
    plan = sched.plan(now=far)
    assert plan.at == far  # not clamped: plan writes nothing
    assert [p.run_id for p in plan.due] == ["2027-04-05T09:00:00Z"]
    assert sched.tick().claimed == ()  # the plan claimed nothing


def test_plan_lists_resends_and_expiring_runs(make, clock) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"at": (T0 + MINUTE).isoformat()}))
    sched.register(spec("r2", {"at": (T0 + 30 * MINUTE).isoformat()}))
    clock.set(T0 + MINUTE)
    sched.tick()
    clock.set(T0 + 30 * MINUTE)
    sched.tick()
    plan = sched.plan(now=T0 + 61 * MINUTE)
    assert [k.routine_id for k in plan.resends] == ["r2"]
    assert [k.routine_id for k in plan.expiring] == ["r1"]
