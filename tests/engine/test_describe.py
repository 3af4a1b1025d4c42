"""``Scheduler.describe``: one routine's view, on every store (reads only)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from engine_support import MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.errors import NotFound


def at(minutes: int) -> datetime:
    return T0 + minutes * MINUTE


@every_store
def test_the_view_of_a_running_routine_with_a_backfill(make, clock) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "*/10 * * * *", "max_runs": 50}, behave="fail"))
    clock.set(at(10))
    sched.tick()
    sched.execute(disp.runs[0].key)  # 10 fails
    clock.set(at(60))
    sched.tick()  # 60 stays claimed
    view = sched.describe(SCOPE, "r1", fires=3, runs=5)
    assert view.key == "org-a/user-1/r1" and view.kind == "script"
    assert view.schedule == {"cron": "*/10 * * * *"}
    assert view.policies["max_runs"] == 50 and view.policies["overlap"] == "skip"
    assert (view.state, view.erroring, view.streak, view.failure_threshold) == ("enabled", False, 1, 5)
    assert [f.utc for f in view.next_fires] == [at(70), at(80), at(90)]
    assert [(r.run_id, r.state) for r in view.recent_runs] == [
        ("2026-03-02T09:00:00Z", "claimed"),
        ("2026-03-02T08:10:00Z", "failed"),
    ]
    assert view.recent_runs[1].duration_s == 0.0 and view.recent_runs[0].duration_s is None
    assert view.blocking is not None and view.blocking.run_id == "2026-03-02T09:00:00Z"
    assert view.buffered is None and view.backfill is None
    sched.execute(disp.runs[1].key)
    sched.backfill(SCOPE, "r1", at(20), at(50))
    later = sched.describe(SCOPE, "r1")
    assert later.blocking is None and later.backfill is not None
    assert later.backfill["pending"] and later.backfill["next_at"] == at(20).isoformat()
    assert later.to_dict()["next_fires"][0]["utc"] == at(70).isoformat()  # JSON-ready


@every_store
def test_paused_erroring_and_dst_notes(make, clock) -> None:
    sched = make()
    sched.register(spec("ny", {"cron": "30 2 * * *", "tz": "America/New_York", "jitter": "30s"}))
    clock.set(datetime(2026, 3, 6, 12, 0, tzinfo=UTC))  # spring forward on Sunday 2026-03-08
    view = sched.describe(SCOPE, "ny", fires=4)
    notes = [f.note for f in view.next_fires]
    assert any(n and "shifted: 02:30 does not exist" in n for n in notes), notes
    assert any(n and "DST: offset -05:00 → -04:00" in n for n in notes), notes
    assert any("jitter" in n for n in view.notes)
    sched.pause(SCOPE, "ny", "maintenance")
    paused = sched.describe(SCOPE, "ny")
    assert (paused.state, paused.paused_reason) == ("paused", "maintenance")
    assert any(n.startswith("paused") for n in paused.notes)
    with pytest.raises(NotFound):
        sched.describe(SCOPE, "nope")
    sched.delete(SCOPE, "ny")
    with pytest.raises(NotFound):
        sched.describe(SCOPE, "ny")


def test_an_exhausted_schedule_reads_finished(make, clock) -> None:
    sched = make()
    sched.register(spec("once", {"at": at(5).isoformat()}))
    clock.set(at(6))
    sched.tick()
    view = sched.describe(SCOPE, "once")
    assert view.state == "finished" and view.next_fires == ()
    assert "the schedule has no further fire" in view.notes
