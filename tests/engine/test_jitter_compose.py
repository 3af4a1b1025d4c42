"""Jitter composed with the other schedule policies (issue 15): the bounds select NOMINAL fires,
``catch_up`` counts from the due instant, ``max_runs`` counts started rows, a buffered fire keeps
its due instant, and every writer of ``next_due_at`` (registration, reindex, the zone data
reconciliation) and every preview (``describe``) gives the jittered instant."""

from __future__ import annotations

from datetime import timedelta

from engine_support import HOUR, MINUTE, SCOPE, T0, RecordingDispatcher, spec

from alma_schedule.core import fire_id
from alma_schedule.engine.decide import due_of
from alma_schedule.engine.register import rederived_due
from alma_schedule.engine.upcoming import upcoming_fires
from alma_schedule.model import RunKey, RunResult, RunState
from alma_schedule.policies.finished import finished_reason
from alma_schedule.settings import Settings
from alma_schedule.timers import Timers

SECOND = timedelta(seconds=1)
FIRE1, FIRE2 = T0 + HOUR, T0 + 2 * HOUR  # an every-1h routine registered at T0 (the clock's start)


def _run(sched, key: RunKey):
    [run] = [r for r in sched.runs(SCOPE, routine_id=key.routine_id) if r.run_id == key.run_id]
    return run


def test_not_after_bounds_the_nominal_fire_not_its_due_instant(make, clock) -> None:
    sched = make()
    r = sched.register(spec("r1", {"every": "1h", "jitter": "40m", "not_after": FIRE2.isoformat()})).routine
    due1, due2 = due_of(r, FIRE1), due_of(r, FIRE2)
    assert due1 is not None and due2 is not None and due2 > FIRE2 + MINUTE  # due after not_after
    assert r.next_due_at == due1
    clock.set(due1)
    assert [c.run_id for c in sched.tick().claimed] == [fire_id(FIRE1)]  # run in-process
    assert sched.get(SCOPE, "r1").next_due_at == due2
    assert [(p.utc, p.fire) for p in upcoming_fires(sched.get(SCOPE, "r1"), FIRE2 + SECOND, 5)] == [(due2, FIRE2)]
    clock.set(due2 - SECOND)
    assert sched.tick().claimed == ()
    ahead = sched.get(SCOPE, "r1")  # past not_after, but its last fire is still to come: not finished
    assert due2 - SECOND > FIRE2 and finished_reason(ahead, due2 - SECOND) is None
    assert ahead.state_names[0] == "enabled"
    clock.set(due2)
    [key] = sched.tick().claimed
    run = _run(sched, key)
    assert (run.run_id, run.fire_at, run.due_at) == (fire_id(FIRE2), FIRE2, due2)
    after = sched.get(SCOPE, "r1")
    assert after.next_due_at is None and finished_reason(after, due2) == "not_after"


def test_catch_up_counts_from_the_due_instant(make, clock) -> None:
    sched = make()
    r = sched.register(spec("r1", {"every": "1h", "jitter": "40m", "catch_up": "10m"})).routine
    due1, due2 = due_of(r, FIRE1), due_of(r, FIRE2)
    assert due1 is not None and due2 is not None and due1 - FIRE1 > MINUTE
    clock.set(due1 + 9 * MINUTE)  # over 10 min after the nominal fire, under 10 after it came due
    [key] = sched.tick().claimed
    run = _run(sched, key)
    assert (run.run_id, run.expires_at, run.due_at) == (fire_id(FIRE1), due1 + 10 * MINUTE, due1)
    clock.set(due2 + 11 * MINUTE)  # past the window of the second fire
    batch = sched.tick()
    assert batch.claimed == ()
    missed = sched.runs(SCOPE, state="skipped")
    assert [(m.run_id, m.reason, m.due_at) for m in missed] == [(fire_id(FIRE2), "missed", due2)]


def test_max_runs_counts_started_rows_and_the_receipt_shows_due_instants(make, clock) -> None:
    sched = make()
    receipt = sched.register(spec("r1", {"every": "1h", "jitter": "40m", "max_runs": 1}))
    r = receipt.routine
    due1 = due_of(r, FIRE1)
    assert receipt.next_fires == (due1,)
    clock.set(due1)
    [key] = sched.tick().claimed
    run = _run(sched, key)
    assert (run.run_id, run.due_at) == (fire_id(FIRE1), due1)
    after = sched.get(SCOPE, "r1")
    assert (after.schedule_starts, after.next_due_at) == (1, None)
    assert upcoming_fires(after, due1, 5) == []


def test_a_buffered_fire_keeps_its_due_instant_when_released(make, clock, store) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    r = sched.register(spec("r1", {"every": "1h", "jitter": "20m", "overlap": "latest"})).routine
    due1, due2 = due_of(r, FIRE1), due_of(r, FIRE2)
    assert due1 is not None and due2 is not None
    clock.set(due1)
    [first] = sched.tick().claimed
    assert store.start(first, now=due1).won  # the active run
    clock.set(due2)
    [held_key] = sched.tick().buffered
    held = _run(sched, held_key)
    assert (held.state, held.run_id, held.fire_at, held.due_at) == (RunState.BUFFERED, fire_id(FIRE2), FIRE2, due2)
    done = store.finish(first, RunResult.completed(), now=due2 + MINUTE, timers=Timers.from_settings(Settings()))
    assert done.won  # the active run ends: its transaction releases the buffered fire
    released = sched.runs(SCOPE, state="claimed")
    assert [(x.run_id, x.due_at) for x in released] == [(fire_id(FIRE2), due2)]
    assert sched.get(SCOPE, "r1").next_due_at == due_of(r, T0 + 3 * HOUR)


def test_rederived_due_and_describe_give_the_jittered_instant(make, clock) -> None:
    sched = make()
    r = sched.register(spec("r1", {"cron": "0 * * * *", "jitter": "20m", "not_before": FIRE1.isoformat()})).routine
    due1 = due_of(r, FIRE1)
    assert due1 is not None and due1 != FIRE1
    assert rederived_due(r) == r.next_due_at == due1  # reindex and the zone data reconciliation
    view = sched.describe(SCOPE, "r1", fires=2)
    assert [(f.utc, f.fire) for f in view.next_fires] == [(due1, FIRE1), (due_of(r, FIRE2), FIRE2)]
    assert any(n and "jitter +" in n for n in (f.note for f in view.next_fires))
    clock.set(due1)
    [key] = sched.tick().claimed  # run in-process at due1: no lag, whatever its jitter
    assert key == RunKey.of(SCOPE, "r1", fire_id(FIRE1))
    [recent] = sched.describe(SCOPE, "r1").recent_runs
    assert (recent.state, recent.due_at, recent.lag_s) == ("completed", due1, 0.0)
