"""Contract: the heartbeat's wake-up hint and the routines that carry a planning error."""

from __future__ import annotations

from alma_schedule.model import Defer, Routine
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import HOUR, MINUTE, SCOPE, T0, TIMERS, fire_due, register, run_in


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
