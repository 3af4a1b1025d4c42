"""Issue 44: the fires a tick's claims collapse are counted, through the engine's own levers and
registration (the store contract, ``MissedContract``, holds the stores to the same rule with the
engine's ``decide``): on the routine, in the tick report (``fires_missed``, by kind for the worker's
metric), in ``plan``; never across a pause, a disable or a schedule change."""

from __future__ import annotations

from datetime import timedelta

from engine_support import DAY, HOUR, MINUTE, SCOPE, T0, every_store, spec


@every_store
def test_a_tick_after_downtime_counts_the_collapsed_fires_and_reports_them(make, clock, runner) -> None:
    sched = make()
    sched.register(spec("daily", {"cron": "0 9 * * *"}))
    sched.register(spec("minutely", {"every": "1m"}))
    clock.set(T0.replace(hour=9))
    sched.tick()
    clock.set(T0.replace(hour=10) + 3 * DAY)  # down for three days
    plan = sched.plan()
    assert {d.routine_id: d.fires_missed for d in plan.due} == {"daily": 2, "minutely": 3 * 24 * 60 + 60 - 1}
    report = sched.tick()
    assert [k.run_id for k in report.claimed if k.routine_id == "daily"] == ["2026-03-05T09:00:00Z"]
    assert report.fires_missed == 2 + 4379 and report.missed_kinds == (("script", 4381),)
    assert report.to_dict()["fires_missed"] == 4381
    assert sched.get(SCOPE, "daily").fires_missed == 2  # 03-03 and 03-04: no row, counted
    assert sched.get(SCOPE, "minutely").fires_missed == 59 + 4379  # 08:01 .. 08:59 at the first tick too
    again = sched.tick()
    assert again.claimed == () and again.fires_missed == 0 and again.to_dict()["fires_missed"] == 0


@every_store
def test_pause_disable_and_a_schedule_change_are_not_counted(make, clock, runner) -> None:
    sched = make()
    sched.register(spec("paused", {"every": "1m"}))
    sched.register(spec("disabled", {"every": "1m"}))
    sched.register(spec("changed", {"every": "1m"}))
    clock.set(T0 + MINUTE)
    sched.tick()
    sched.pause(SCOPE, "paused")
    sched.disable(SCOPE, "disabled")
    clock.set(T0 + HOUR + timedelta(seconds=30))
    sched.resume(SCOPE, "paused")
    sched.enable(SCOPE, "disabled")
    sched.register(spec("changed", {"cron": "* * * * *"}))  # a new timing: the cursor restarts at now
    clock.set(T0 + HOUR + MINUTE)  # the first fire after the restarts: the hour before was not due
    report = sched.tick()
    assert {k.routine_id for k in report.claimed} == {"paused", "disabled", "changed"}
    assert report.fires_missed == 0
    assert {rid: sched.get(SCOPE, rid).fires_missed for rid in ("paused", "disabled", "changed")} == dict.fromkeys(
        ("paused", "disabled", "changed"), 0
    )
