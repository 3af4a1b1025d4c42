"""Contract: the heartbeat's wake-up hint, the routines that carry a planning error, and the zone
data walk, and a deadline's poll on time."""

from __future__ import annotations

from datetime import datetime

from alma_schedule.model import Defer, Routine
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    SCOPE,
    SECOND,
    T0,
    TIMERS,
    claim,
    everything,
    fire_due,
    register,
    run_in,
)


def _off(store: Store, routine_id: str = "r1") -> None:
    """Take a routine out of the due index (so only its run's timers are left)."""
    store.set_enabled(SCOPE, routine_id, False, now=T0, next_due_at=None)


class WakeContract:
    def test_the_hint_is_the_earliest_next_due_strictly_after_now(self, store: Store) -> None:
        assert store.heartbeat(T0) is None and store.next_wake_at() is None
        register(store, "later", next_due_at=T0 + 10 * MINUTE)
        register(store, "due", next_due_at=T0 - MINUTE)
        register(store, "at-now", next_due_at=T0)
        assert store.heartbeat(T0) == T0 + 10 * MINUTE
        assert store.next_wake_at() == T0 + 10 * MINUTE
        assert store.peek_wake(T0) == T0 + 10 * MINUTE
        assert store.peek_wake(T0 + 10 * MINUTE) is None
        assert store.last_tick() == T0

    def test_a_claimed_run_wakes_at_its_resend_then_at_its_expiry(self, store: Store) -> None:
        rec = run_in(store, "claimed", now=T0)
        assert rec.resend_at is not None and rec.resend_at > T0
        routine = store.get_routine(SCOPE, "r1")
        assert routine is not None and routine.next_due_at is not None
        assert store.peek_wake(T0) == min(routine.next_due_at, rec.resend_at)
        _off(store)
        assert store.peek_wake(T0) == rec.resend_at
        assert store.peek_wake(rec.resend_at) == rec.expires_at
        assert store.peek_wake(rec.expires_at) is None

    def test_a_submitted_run_wakes_at_its_next_poll(self, store: Store) -> None:
        rec = run_in(store, "submitted", now=T0)
        _off(store)
        assert rec.next_poll_at is not None and rec.next_poll_at > T0
        assert store.peek_wake(T0) == rec.next_poll_at
        assert store.heartbeat(T0) == rec.next_poll_at

    def test_a_running_run_has_no_timer_of_its_own(self, store: Store) -> None:
        run_in(store, "running", now=T0)
        _off(store)
        assert store.peek_wake(T0) is None

    def test_a_deferred_routine_wakes_at_its_next_attempt(self, store: Store) -> None:
        register(store, next_due_at=T0)
        store.claim_due(T0, 10, lambda r: Defer(T0 + HOUR, "no zone data"), TIMERS)
        assert store.peek_wake(T0) == T0 + HOUR

    def test_an_older_heartbeat_keeps_the_last_tick_and_stores_its_own_hint(self, store: Store) -> None:
        register(store, next_due_at=T0 + HOUR)
        store.heartbeat(T0 + MINUTE)
        assert store.heartbeat(T0) == T0 + HOUR
        assert store.last_tick() == T0 + MINUTE
        assert store.next_wake_at() == T0 + HOUR

    def test_erroring_lists_the_earliest_next_attempts_and_counts_them_all(self, store: Store) -> None:
        order = ("c", "a", "b", "gone")

        def bad(routine: Routine) -> Defer:
            return Defer(T0 + (order.index(routine.routine_id) + 1) * HOUR, f"bad {routine.routine_id}")

        for rid in order:
            register(store, rid, next_due_at=T0)
        store.claim_due(T0, 10, bad, TIMERS)
        register(store, "healthy", next_due_at=T0 + HOUR)
        store.delete_routine(SCOPE, "gone", now=T0)
        got = store.erroring(limit=2)
        assert got.count == 3
        assert [(d.routine_id, d.until, d.error) for d in got.routines] == [
            ("c", T0 + HOUR, "bad c"),
            ("a", T0 + 2 * HOUR, "bad a"),
        ]
        assert [d.routine_id for d in store.erroring().routines] == ["c", "a", "b"]
        assert store.erroring(limit=0).routines == ()

    def test_a_fire_clears_the_error(self, store: Store) -> None:
        register(store, next_due_at=T0)
        store.claim_due(T0, 10, lambda r: Defer(T0 + MINUTE, "flaky"), TIMERS)
        assert store.erroring().count == 1
        assert len(store.claim_due(T0 + MINUTE, 10, fire_due, TIMERS).claimed) == 1
        assert store.erroring().count == 0


class ZoneDataContract:
    def test_the_zone_data_walk_takes_one_page_per_call_and_then_records_the_zone_data(self, store: Store) -> None:
        for rid in ("a", "b", "c", "d"):
            register(store, rid, next_due_at=T0)
        store.set_paused(SCOPE, "c", "operator", now=T0, next_due_at=None)

        def derive(routine: Routine) -> datetime:
            return T0 + HOUR

        first = store.reconcile_zone_data(derive, "tzdata 2099a", limit=2)
        assert (first.previous, first.changed, first.done) == (None, 2, False)
        second = store.reconcile_zone_data(derive, "tzdata 2099a", limit=2)
        assert (second.changed, second.done) == (1, False)  # c is paused: no next fire to derive
        last = store.reconcile_zone_data(derive, "tzdata 2099a", limit=2)
        assert (last.previous, last.changed, last.done) == (None, 0, True)
        rows = {r.routine_id: r for r in store.iter_routines()}
        assert {rid: r.next_due_at for rid, r in rows.items()} == {
            "a": T0 + HOUR,
            "b": T0 + HOUR,
            "c": None,
            "d": T0 + HOUR,
        }
        assert {r.tzdata_version for rid, r in rows.items() if rid != "c"} == {"tzdata 2099a"}
        before = everything(store)
        again = store.reconcile_zone_data(derive, "tzdata 2099a", limit=2)
        assert (again.previous, again.changed, again.done) == ("tzdata 2099a", 0, True)
        assert everything(store) == before  # recorded: nothing walked again
        newer = store.reconcile_zone_data(lambda r: T0 + 2 * HOUR, "tzdata 2100a", limit=10)
        assert (newer.previous, newer.changed, newer.done) == ("tzdata 2099a", 3, True)


class DeadlinePollContract:
    def test_a_poll_is_due_at_deadline_plus_tolerance_not_a_back_off_step_later(self, store: Store) -> None:
        register(store, next_due_at=T0)
        rec = claim(store, now=T0)
        assert store.start(rec.key, now=T0).won
        deadline = T0 + 50 * SECOND  # the first poll at +30 s, the back-off would push the next to +90 s
        assert store.submit(rec.key, now=T0, batch_id="b", deadline=deadline, next_poll_at=T0 + 30 * SECOND).won
        [polled] = store.take_polls(T0 + 30 * SECOND, 10, TIMERS)
        assert polled.next_poll_at == deadline + TIMERS.clock_tolerance
        got = store.get(rec.key)
        assert got is not None and got.next_poll_at == deadline + TIMERS.clock_tolerance
        assert store.take_polls(deadline + TIMERS.clock_tolerance - SECOND, 10, TIMERS) == []
        [late] = store.take_polls(deadline + TIMERS.clock_tolerance, 10, TIMERS)  # when timed_out may be recorded
        assert late.next_poll_at is not None and late.next_poll_at > deadline + TIMERS.clock_tolerance

    def test_a_far_deadline_leaves_the_back_off_alone(self, store: Store) -> None:
        rec = run_in(store, "submitted", now=T0)  # deadline T0 + 1 hour
        [polled] = store.take_polls(T0 + 30 * SECOND, 10, TIMERS)
        assert polled.next_poll_at == T0 + 30 * SECOND + TIMERS.poll_first * 2
        assert rec.deadline == T0 + HOUR
