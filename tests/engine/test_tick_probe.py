"""The tick's probe: an idle tick skips every step (nothing asked of the broker), and what the tick
itself makes eligible is not left for the next one."""

from __future__ import annotations

from engine_support import HOUR, MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.model import RunState


@every_store
def test_an_idle_tick_asks_the_broker_nothing_a_due_resend_asks_the_depth(make, clock) -> None:
    disp = RecordingDispatcher(depth=50)
    sched = make(dispatcher=disp, resend_pause_depth=10)
    sched.register(spec("r1", {"at": (T0 + MINUTE).isoformat()}))
    idle = sched.tick()
    assert (idle.claimed, idle.sends_paused, idle.next_wake_at, disp.depth_asked) == ((), False, T0 + MINUTE, 0)
    clock.set(T0 + MINUTE)
    assert [k.routine_id for k in sched.tick().claimed] == ["r1"]
    assert disp.depth_asked == 0  # the fire was sent; nothing to re-send yet
    clock.set(T0 + 3 * MINUTE)  # past resend_first (2 minutes): a re-send is due, the queue is deep
    report = sched.tick()
    assert (report.resent, report.sends_paused, disp.depth_asked) == ((), True, 1)


@every_store
def test_a_tombstoned_routine_whose_last_run_expires_is_purged_by_that_tick(make, clock, store) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"at": (T0 + MINUTE).isoformat()}))
    clock.set(T0 + MINUTE)
    (key,) = sched.tick().claimed
    sched.delete(SCOPE, "r1")
    assert store.probe_tick(clock(), sched.settings.run_time_limit).purge is False  # its run is open
    clock.set(T0 + MINUTE + 2 * HOUR)  # the one-shot window has closed
    report = sched.tick()
    assert report.expired == (key,)
    assert store.get_routine(SCOPE, "r1", include_deleted=True) is None  # purged in the same tick
    assert store.get(key) is None or store.get(key).state == RunState.SKIPPED  # type: ignore[union-attr]
