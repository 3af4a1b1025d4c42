"""Backfill through the engine: the bounds and refusals, one fire per tick, live fires first, the
overlap of a live fire with a backfill run, pause, cancel, prune's ``pruned_through``; every store."""

from __future__ import annotations

import pytest
from engine_support import MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.errors import BackfillRefused, InvalidInput, NotFound

EVERY_10 = {"cron": "*/10 * * * *"}


def at(minutes: int):
    return T0 + minutes * MINUTE


def fid(minutes: int) -> str:
    return at(minutes).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ledger(sched, routine_id="r1"):
    return sorted((r.run_id, r.origin, r.state, r.reason) for r in sched.runs(SCOPE, routine_id=routine_id, limit=1000))


def _downtime(sched, clock):
    """Registered at T0; a tick at 10 and one at 60: 20..50 were missed and have no row."""
    sched.register(spec("r1", EVERY_10))
    for m in (10, 60):
        clock.set(at(m))
        sched.tick()
    assert [r[0] for r in _ledger(sched)] == [fid(10), fid(60)]


@every_store
def test_a_backfill_runs_each_missing_fire_once_one_per_tick(make, clock, runner) -> None:
    sched = make()
    _downtime(sched, clock)
    receipt = sched.backfill(SCOPE, "r1", at(10), at(60))
    assert (receipt.fires, receipt.already_run, receipt.first, receipt.last) == (4, 2, at(20), at(50))
    assert receipt.backfill.pending and receipt.backfill.next_at == at(20)
    claimed = []
    for m in range(61, 67):  # no live fire is due before 70
        clock.set(at(m))
        claimed.append([k.run_id for k in sched.tick().claimed])
    assert claimed == [[fid(20)], [fid(30)], [fid(40)], [fid(50)], [], []]
    rows = _ledger(sched)
    expected = [(fid(m), "backfill", "completed", "ok") for m in (20, 30, 40, 50)]
    assert [r for r in rows if r[1] == "backfill"] == expected
    assert len(rows) == 6 and runner.ran().count(fid(20)) == 1
    done = sched.store.get_backfill(SCOPE, "r1")
    assert done is not None and done.next_at is None and not done.pending
    # the range is done: a new one over the same fires has nothing left to run
    with pytest.raises(BackfillRefused) as refused:
        sched.backfill(SCOPE, "r1", at(10), at(60))
    assert refused.value.reason == "empty"


@every_store
def test_refusals_name_the_bound_and_the_count_and_write_nothing(make, clock) -> None:
    sched = make()
    _downtime(sched, clock)
    cases = [
        ((at(20), at(61)), {}, "future", at(60), 5),  # 20..60 could be
        ((at(-10), at(30)), {}, "registered_at", T0, 3),  # 10, 20, 30 lie after it
        ((at(0), at(30)), {}, "registered_at", T0, 3),
        ((at(20), at(50)), {"max_fires": 3}, "max", 3, 4),
    ]
    for (start, end), kw, reason, bound, count in cases:
        with pytest.raises(BackfillRefused) as refused:
            sched.backfill(SCOPE, "r1", start, end, **kw)
        got = (refused.value.reason, refused.value.bound, refused.value.count)
        assert got == (reason, bound, count), refused.value
        assert "\n" not in str(refused.value) and f"{count} fires" in str(refused.value)
    with pytest.raises(BackfillRefused) as over:
        sched.backfill(SCOPE, "r1", at(20), at(50), max_fires=3)
    assert over.value.count == 4 and "4 fires" in str(over.value) and "--max 3" in str(over.value)
    with pytest.raises(BackfillRefused) as empty:
        sched.backfill(SCOPE, "r1", at(21), at(29))
    assert (empty.value.reason, empty.value.count) == ("empty", 0)
    with pytest.raises(InvalidInput):
        sched.backfill(SCOPE, "r1", at(40), at(20))
    with pytest.raises(NotFound):
        sched.backfill(SCOPE, "nope", at(20), at(50))
    assert sched.store.get_backfill(SCOPE, "r1") is None
    sched.pause(SCOPE, "r1")
    with pytest.raises(BackfillRefused) as paused:
        sched.backfill(SCOPE, "r1", at(20), at(50))
    assert paused.value.reason == "paused"
    sched.resume(SCOPE, "r1")
    sched.disable(SCOPE, "r1")
    with pytest.raises(BackfillRefused) as disabled:
        sched.backfill(SCOPE, "r1", at(20), at(50))
    assert disabled.value.reason == "disabled"
    sched.enable(SCOPE, "r1")
    sched.backfill(SCOPE, "r1", at(20), at(30))
    with pytest.raises(BackfillRefused) as pending:
        sched.backfill(SCOPE, "r1", at(40), at(50))
    assert pending.value.reason == "pending"


@every_store
def test_a_range_past_the_cursor_is_refused(make, clock) -> None:
    sched = make()
    sched.register(spec("r1", EVERY_10))
    clock.set(at(15))
    with pytest.raises(BackfillRefused) as none_yet:
        sched.backfill(SCOPE, "r1", at(5), at(10))
    assert (none_yet.value.reason, none_yet.value.bound, none_yet.value.count) == ("last_fire", None, 0)
    sched.tick()  # claims 10: the cursor
    with pytest.raises(BackfillRefused) as after:
        sched.backfill(SCOPE, "r1", at(5), at(12))
    assert (after.value.reason, after.value.bound, after.value.count) == ("last_fire", at(10), 1)
    assert "holds 1 fires up to it" in str(after.value)


@every_store
def test_live_fires_come_first_and_a_live_fire_meets_the_overlap_policy(make, clock) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    _downtime(sched, clock)
    for r in list(disp.runs):
        sched.execute(r.key)
    sched.backfill(SCOPE, "r1", at(20), at(30))
    clock.set(at(70))  # the live fire of 70 is due: it is claimed, the backfill waits
    assert [k.run_id for k in sched.tick().claimed] == [fid(70)]
    clock.set(at(71))
    assert sched.tick().claimed == ()  # the live run is still claimed: nothing else starts
    sched.execute(disp.runs[-1].key)
    backfill_run = sched.tick().claimed
    assert [k.run_id for k in backfill_run] == [fid(20)]
    rec = sched.run(SCOPE, "r1", fid(20))
    assert (rec.origin, rec.state, rec.expires_at) == ("backfill", "claimed", at(71) + sched.settings.one_shot_window)
    clock.set(at(80))  # a live fire while the backfill run is open: the routine's overlap policy (skip)
    report = sched.tick()
    assert fid(80) in [k.run_id for k in report.skipped] and report.claimed == ()
    assert sched.run(SCOPE, "r1", fid(80)).reason == "overlap"
    assert sched.run(SCOPE, "r1", fid(20)).state == "claimed"  # a backfill run is never superseded


@every_store
def test_a_pause_halts_the_backfill_and_keeps_it_pending(make, clock) -> None:
    sched = make()
    _downtime(sched, clock)
    sched.backfill(SCOPE, "r1", at(20), at(50))
    clock.set(at(61))
    assert [k.run_id for k in sched.tick().claimed] == [fid(20)]
    sched.pause(SCOPE, "r1")
    clock.set(at(62))
    assert sched.tick().claimed == ()
    assert sched.store.get_backfill(SCOPE, "r1").pending
    sched.resume(SCOPE, "r1")  # the cursor restarts at 62: the range stays below it
    assert [k.run_id for k in sched.tick().claimed] == [fid(30)]


@every_store
def test_cancel_skips_the_claimed_backfill_run_and_stops_the_range(make, clock) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    _downtime(sched, clock)
    for r in list(disp.runs):
        sched.execute(r.key)
    sched.backfill(SCOPE, "r1", at(20), at(50))
    clock.set(at(61))
    assert [k.run_id for k in sched.tick().claimed] == [fid(20)]
    row, skipped = sched.cancel_backfill(SCOPE, "r1")
    assert row.cancelled_at == at(61) and not row.pending
    assert skipped is not None and (skipped.run_id, skipped.state, skipped.reason) == (fid(20), "skipped", "operator")
    assert sched.execute(disp.runs[-1].key).state == "skipped"  # its message finds it skipped
    clock.set(at(62))
    assert sched.tick().claimed == ()
    again, none = sched.cancel_backfill(SCOPE, "r1")
    assert (again.cancelled_at, none) == (at(61), None)
    with pytest.raises(NotFound):
        sched.cancel_backfill(SCOPE, "r2")


@every_store
def test_a_failed_backfill_run_counts_for_the_streak(make, clock) -> None:
    sched = make(failure_threshold=0)
    sched.register(spec("r1", EVERY_10, behave="fail"))
    for m in (10, 60):
        clock.set(at(m))
        sched.tick()
    assert sched.get(SCOPE, "r1").consecutive_failures == 2
    sched.backfill(SCOPE, "r1", at(20), at(20))
    clock.set(at(61))
    sched.tick()
    assert sched.run(SCOPE, "r1", fid(20)).state == "failed"
    assert sched.get(SCOPE, "r1").consecutive_failures == 3


@every_store
def test_prune_raises_pruned_through_so_a_pruned_fire_is_never_backfilled(make, clock, store) -> None:
    sched = make()
    _downtime(sched, clock)
    assert store.prune(at(60) + MINUTE) == 2
    routine = sched.get(SCOPE, "r1")
    assert routine.pruned_through == at(60)
    with pytest.raises(BackfillRefused) as refused:
        sched.backfill(SCOPE, "r1", at(20), at(50))
    assert (refused.value.reason, refused.value.bound) == ("pruned_through", at(60))
    # a prune that deletes only older rows never lowers it
    assert store.prune(at(60) + MINUTE) == 0
    assert sched.get(SCOPE, "r1").pruned_through == at(60)
