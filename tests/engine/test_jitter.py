"""jitter through the engine: registration's refusal, the due instants of the receipt, previews,
plan, reindex and levers, and a simulated week in which what the previews said is what ticks did."""

from __future__ import annotations

from datetime import timedelta

import pytest
from engine_support import DAY, HOUR, MINUTE, SCOPE, T0, every_store, spec

from alma_schedule.core import next_fires
from alma_schedule.engine.decide import due_of, schedule_of
from alma_schedule.engine.upcoming import upcoming_fires
from alma_schedule.errors import RegistrationRefused
from alma_schedule.stores.memory import MemoryStore

SECOND = timedelta(seconds=1)


def _routine(sched, routine_id: str = "r1"):
    return sched.get(SCOPE, routine_id)


@pytest.mark.parametrize(
    ("schedule", "gap"),
    [({"every": "1h", "jitter": "1h"}, "1h"), ({"cron": "0,50 * * * *", "jitter": "10m"}, "10m")],
)
def test_registration_refuses_a_jitter_at_or_above_the_smallest_gap(make, store, schedule, gap) -> None:
    sched = make()
    with pytest.raises(RegistrationRefused) as info:
        sched.register(spec("r1", schedule))
    text = str(info.value)
    assert "'jitter'" in text and f"({gap} among the next 1000)" in text and "\n" not in text
    assert store.get_routine(SCOPE, "r1") is None  # nothing written
    sched.register(spec("r1", {**schedule, "jitter": "9m"}))  # under the smallest gap: accepted


def test_the_receipt_and_the_index_are_due_instants(make, clock) -> None:
    clock.set(T0 + 5 * SECOND)
    sched = make()
    receipt = sched.register(spec("r1", {"cron": "0 * * * *", "jitter": "30m"}))
    r = receipt.routine
    nominal = next_fires(schedule_of(r), r.registered_at, T0, 3)
    assert nominal[0] == T0 + HOUR
    assert list(receipt.next_fires) == [due_of(r, f) for f in nominal]
    assert r.next_due_at == receipt.next_fires[0] and receipt.next_fires != tuple(nominal)
    assert [p.utc for p in upcoming_fires(r, T0 + 5 * SECOND, 3)] == list(receipt.next_fires)
    assert [p.fire for p in upcoming_fires(r, T0 + 5 * SECOND, 3)] == nominal


def test_a_pending_fire_is_previewed_claimed_and_planned_at_its_due_instant(make, clock) -> None:
    sched = make()
    r = sched.register(spec("r1", {"every": "1h", "jitter": "40m"})).routine
    fire = r.registered_at + HOUR
    due = due_of(r, fire)
    assert due is not None and due > fire + MINUTE  # this key draws a real delay
    clock.set(fire + SECOND)  # the nominal instant has passed, the due instant has not
    [first] = upcoming_fires(_routine(sched), fire + SECOND, 1)
    assert (first.utc, first.fire) == (due, fire) and first.note is not None and "jitter +" in first.note
    assert sched.plan(now=fire + SECOND).due == ()
    early = sched.tick()
    assert early.claimed == () and early.next_wake_at == due  # the wake-up hint is the due instant
    [planned] = sched.plan(now=due).due
    assert (planned.run_id, planned.fire_at, planned.due_at) == ("2026-03-02T09:00:00Z", fire, due)
    assert planned.action == "claim"
    clock.set(due)
    assert len(sched.tick().claimed) == 1
    [run] = sched.runs(SCOPE)
    assert (run.run_id, run.fire_at, run.due_at, run.state) == ("2026-03-02T09:00:00Z", fire, due, "completed")
    assert run.lag == timedelta(0) and run.started_at == due


def test_max_catch_up_counts_from_the_due_instant(make, clock) -> None:
    sched = make(max_catch_up=timedelta(minutes=5))
    r = sched.register(spec("r1", {"every": "1h", "jitter": "40m"})).routine
    fire = r.registered_at + HOUR
    due = due_of(r, fire)
    assert due is not None and due - fire > 5 * MINUTE
    clock.set(due + 4 * MINUTE)  # more than 5 min after the nominal fire, under 5 after it came due
    sched.tick()
    [run] = sched.runs(SCOPE)
    assert (run.state, run.expires_at) == ("completed", due + 5 * MINUTE)


def test_reindex_resume_and_a_new_jitter_write_due_instants(make, clock, store) -> None:
    sched = make()
    r = sched.register(spec("r1", {"cron": "0 * * * *", "jitter": "20m"})).routine
    store.reindex(lambda row: T0)  # a stale index
    assert sched.reindex() == 1
    # reindex derives the index as registration does: a fire at registered_at itself is the first
    nxt = next_fires(schedule_of(r), r.registered_at, r.registered_at - SECOND, 1)[0]
    assert _routine(sched).next_due_at == due_of(r, nxt) == r.next_due_at
    clock.set(T0 + 3 * HOUR + 10 * SECOND)
    sched.pause(SCOPE, "r1", "operator")
    sched.resume(SCOPE, "r1")
    assert _routine(sched).next_due_at == due_of(r, T0 + 4 * HOUR)
    # only the jitter changes: the cursor stays, the same pending fire gets its new due instant
    changed = sched.register(spec("r1", {"cron": "0 * * * *", "jitter": "25m"})).routine
    assert changed.last_fire == _routine(sched).last_fire
    assert changed.next_due_at == due_of(changed, T0 + 4 * HOUR) != due_of(r, T0 + 4 * HOUR)


SCHEDULES = {
    "quarter": {"cron": "*/15 * * * *", "jitter": "5m"},
    "hourly": {"cron": "0 * * * *", "tz": "Europe/London", "jitter": "45m"},
    "two-hours": {"every": "2h", "jitter": "30m"},
    "daily": {"cron": "30 6 * * *", "tz": "America/New_York", "jitter": "2h"},  # crosses the US DST change
    "plain": {"cron": "20 * * * *"},
}


@every_store
def test_a_simulated_week_runs_every_fire_at_the_instant_its_preview_showed(make, clock, store) -> None:
    """A simulated week: each fire is claimed at the first tick at or after the due instant the
    preview showed for it (never before), with that ``due_at``, under its nominal run id; on the
    reference store ``plan``, just before each tick, says the same. Ticks every 5 minutes on the
    reference store; every 30 on SQLite and PostgreSQL (without the 15-minute routine: a tick must
    come between two due instants), which keeps the SQL week to 336 ticks."""
    reference = isinstance(store, MemoryStore)
    step = 5 * MINUTE if reference else 30 * MINUTE
    sched = make()
    schedules = {k: v for k, v in SCHEDULES.items() if reference or k != "quarter"}
    for rid, schedule in schedules.items():
        sched.register(spec(rid, schedule))
    start, end = T0, T0 + 7 * DAY
    shown = {}
    for rid in schedules:
        for p in upcoming_fires(_routine(sched, rid), start, 800):
            if p.utc <= end - step:
                shown[(rid, p.fire.strftime("%Y-%m-%dT%H:%M:%SZ"))] = p.utc
    jittered = sum(1 for (rid, run_id), due in shown.items() if due.strftime("%Y-%m-%dT%H:%M:%SZ") != run_id)
    assert jittered > 0.8 * sum(1 for rid, _ in shown if rid != "plain")
    planned = {}
    now = start + step
    while now <= end:
        if reference:
            for p in sched.plan(now=now).due:
                if p.action == "claim":
                    planned[(p.routine_id, p.run_id)] = p.due_at
        clock.set(now)
        sched.tick()
        now += step
    runs = {(r.routine_id, r.run_id): r for r in sched.runs(SCOPE, limit=5000)}
    assert set(runs) == set(shown)
    if reference:
        assert planned == shown
    for k, run in runs.items():
        due = shown[k]
        assert run.due_at == due
        assert run.state == "completed" and run.started_at is not None
        assert due <= run.claimed_at < due + step  # the first tick at or after the due instant
        assert run.lag is not None and timedelta(0) <= run.lag < step
        assert run.fire_at.strftime("%Y-%m-%dT%H:%M:%SZ") == run.run_id
