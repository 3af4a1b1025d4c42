"""Contract: backfill ranges (``put/get/cancel_backfill``), the tick's ``claim_backfills``,
``prune``'s ``pruned_through``, and the system-wide listing (``system_routines`` and its counts)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest

from alma_schedule.errors import BackfillRefused, InvalidInput, NotFound
from alma_schedule.model import Backfill, BackfillStep, Fire, Routine, RunKey, RunResult
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    OTHER_ORG,
    SCOPE,
    SECOND,
    T0,
    TIMERS,
    claim,
    fire_id,
    register,
    running,
)

PAST = [T0 - 50 * MINUTE, T0 - 40 * MINUTE, T0 - 30 * MINUTE]  # after REGISTERED (T0 - 1h)


def _range(routine_id: str = "r1", scope: object = SCOPE, **kw: object) -> Backfill:
    values: dict[str, object] = {
        "from_at": PAST[0],
        "to_at": PAST[-1],
        "next_at": PAST[0],
        "max_fires": 1000,
    }
    values.update(kw)
    return Backfill(scope.org, scope.uid, routine_id, **values)  # type: ignore[attr-defined, arg-type]


def _plan(fires: list[datetime], *, exhausted: bool = True) -> object:
    """A hand-written plan: the given fires from ``next_at`` on (the core is not involved)."""

    def plan(routine: Routine, row: Backfill) -> BackfillStep:
        assert row.next_at is not None
        left = [f for f in fires if f >= row.next_at]
        return BackfillStep(
            tuple((fire_id(f), f) for f in left), expires_at=T0 + HOUR, resend_at=T0 + MINUTE, exhausted=exhausted
        )

    return plan


def _idle(store: Store, routine_id: str = "r1") -> Routine:
    """A live routine not due at T0 (its next fire is later), with no run."""
    return register(store, routine_id, next_due_at=T0 + HOUR, last_fire=T0 - 10 * MINUTE)


class BackfillContract:
    # ------------------------------------------------------------------ the range rows

    def test_put_get_and_one_pending_range_per_routine(self, store: Store) -> None:
        _idle(store)
        assert store.get_backfill(SCOPE, "r1") is None
        row = store.put_backfill(_range(), now=T0)
        assert row == dataclasses.replace(_range(), created_at=T0) and row.pending
        assert store.get_backfill(SCOPE, "r1") == row
        with pytest.raises(BackfillRefused) as refused:
            store.put_backfill(_range(from_at=PAST[1]), now=T0)
        assert refused.value.reason == "pending"
        assert store.get_backfill(SCOPE, "r1") == row
        assert store.get_backfill(OTHER_ORG, "r1") is None

    def test_put_is_refused_on_an_unknown_deleted_paused_or_disabled_routine(self, store: Store) -> None:
        with pytest.raises(NotFound):
            store.put_backfill(_range(), now=T0)
        _idle(store, "p")
        store.set_paused(SCOPE, "p", "manual", now=T0, next_due_at=None)
        _idle(store, "d")
        store.set_enabled(SCOPE, "d", False, now=T0, next_due_at=None)
        _idle(store, "x")
        store.delete_routine(SCOPE, "x", now=T0)
        for rid, reason in (("p", "paused"), ("d", "disabled")):
            with pytest.raises(BackfillRefused) as refused:
                store.put_backfill(_range(rid), now=T0)
            assert refused.value.reason == reason
        with pytest.raises(NotFound):
            store.put_backfill(_range("x"), now=T0)
        assert [store.get_backfill(SCOPE, r) for r in ("p", "d", "x")] == [None, None, None]

    def test_bad_ranges_are_invalid_input(self, store: Store) -> None:
        _idle(store)
        for bad in (
            _range(from_at=PAST[-1], to_at=PAST[0]),
            _range(max_fires=0),
            _range(from_at=PAST[0].replace(tzinfo=None)),
        ):
            with pytest.raises(InvalidInput):
                store.put_backfill(bad, now=T0)
        assert store.get_backfill(SCOPE, "r1") is None

    def test_a_done_or_cancelled_range_is_replaced(self, store: Store) -> None:
        _idle(store)
        store.put_backfill(_range(), now=T0)
        store.cancel_backfill(SCOPE, "r1", now=T0)
        fresh = store.put_backfill(_range(from_at=PAST[1], next_at=PAST[1]), now=T0 + MINUTE)
        assert fresh.pending and fresh.cancelled_at is None and fresh.created_at == T0 + MINUTE

    # ------------------------------------------------------------------ claim_backfills

    def test_each_call_claims_the_first_fire_without_a_row_then_moves_on(self, store: Store) -> None:
        routine = _idle(store)
        store.put_backfill(_range(), now=T0)
        plan = _plan(PAST)
        [first] = store.claim_backfills(T0, 100, plan, TIMERS)  # type: ignore[arg-type]
        expected = (fire_id(PAST[0]), "backfill", "claimed", PAST[0])
        assert (first.run_id, first.origin, first.state, first.fire_at) == expected
        assert (first.claimed_at, first.expires_at, first.resend_at) == (T0, T0 + HOUR, T0 + MINUTE)
        assert first.config_revision == routine.config_revision
        assert store.get_backfill(SCOPE, "r1").next_at == PAST[0] + SECOND  # type: ignore[union-attr]
        # the routine has a non-terminal run: nothing more until it ends
        assert store.claim_backfills(T0, 100, plan, TIMERS) == []  # type: ignore[arg-type]
        store.start(first.key, now=T0)
        store.finish(first.key, RunResult.completed("ok"), now=T0, timers=TIMERS)
        [second] = store.claim_backfills(T0, 100, plan, TIMERS)  # type: ignore[arg-type]
        assert second.run_id == fire_id(PAST[1])
        store.record(second.key, "skipped", "missed", now=T0)
        [third] = store.claim_backfills(T0, 100, plan, TIMERS)  # type: ignore[arg-type]
        assert third.run_id == fire_id(PAST[2])
        row = store.get_backfill(SCOPE, "r1")
        assert row is not None and row.next_at is None and not row.pending  # the last of an exhausted step
        store.record(third.key, "skipped", "missed", now=T0)
        assert store.claim_backfills(T0, 100, plan, TIMERS) == []  # type: ignore[arg-type]

    def test_a_backfill_run_is_due_when_claimed(self, store: Store) -> None:
        _idle(store)
        store.put_backfill(_range(), now=T0)
        [first] = store.claim_backfills(T0 + 5 * SECOND, 100, _plan(PAST), TIMERS)  # type: ignore[arg-type]
        assert (first.fire_at, first.due_at) == (PAST[0], T0 + 5 * SECOND), "the past fire, due at its claim"
        started = store.start(first.key, now=T0 + 7 * SECOND).record
        assert started is not None and started.lag == 2 * SECOND, "lag from the claim, not 50 minutes"
        assert store.get(first.key) == started

    def test_the_wake_hint_includes_a_pending_backfill_claim(self, store: Store) -> None:
        _idle(store)  # next due at T0 + 1 h
        assert store.peek_wake(T0 - SECOND) == T0 + HOUR
        store.put_backfill(_range(), now=T0)
        assert store.peek_wake(T0 - SECOND) == T0, "a range put after the last tick wakes a tick"
        assert store.peek_wake(T0) == T0 + HOUR and store.heartbeat(T0) == T0 + HOUR, "strictly after"
        plan = _plan(PAST)
        [first] = store.claim_backfills(T0, 100, plan, TIMERS)  # type: ignore[arg-type]
        assert store.peek_wake(T0) == T0 + MINUTE, "its run open: its re-send"
        assert store.start(first.key, now=T0 + SECOND).won
        assert store.finish(first.key, RunResult.completed("ok"), now=T0 + 10 * SECOND, timers=TIMERS).won
        assert store.peek_wake(T0) == T0 + 10 * SECOND, "its run ended: the next claim, not a re-send"
        assert store.heartbeat(T0 + 10 * SECOND) == T0 + HOUR, "a tick at that instant claimed what it could"
        [second] = store.claim_backfills(T0 + 10 * SECOND, 100, plan, TIMERS)  # type: ignore[arg-type]
        store.record(second.key, "skipped", "missed", now=T0 + 20 * SECOND)  # ended, with no finished run
        assert store.peek_wake(T0 + 10 * SECOND) == T0 + 20 * SECOND
        [third] = store.claim_backfills(T0 + 20 * SECOND, 100, plan, TIMERS)  # type: ignore[arg-type]
        store.record(third.key, "skipped", "missed", now=T0 + 30 * SECOND)
        assert store.get_backfill(SCOPE, "r1").pending is False  # type: ignore[union-attr]
        assert store.peek_wake(T0 + 20 * SECOND) == T0 + HOUR, "a done range wakes nothing"

    def test_a_fire_that_has_a_row_is_passed_over(self, store: Store) -> None:
        register(store, next_due_at=PAST[0])

        def schedule_fire(routine: Routine) -> Fire:
            return Fire(fire_id(PAST[0]), PAST[0], T0 + HOUR, next_due_at=T0 + HOUR)

        [live] = store.claim_due(PAST[0], 100, schedule_fire, TIMERS).claimed
        store.record(live.key, "skipped", "missed", now=T0)  # the fire has its row, whatever its state
        store.put_backfill(_range(), now=T0)
        [rec] = store.claim_backfills(T0, 100, _plan(PAST), TIMERS)  # type: ignore[arg-type]
        assert rec.run_id == fire_id(PAST[1])
        assert store.get(live.key).origin == "schedule"  # type: ignore[union-attr]

    def test_every_candidate_taken_moves_past_them_all(self, store: Store) -> None:
        _idle(store)
        store.put_backfill(_range(), now=T0)

        def same(routine: Routine, row: Backfill) -> BackfillStep:  # always PAST[0], more to come
            return BackfillStep(((fire_id(PAST[0]), PAST[0]),), T0 + HOUR, T0 + MINUTE, exhausted=False)

        [rec] = store.claim_backfills(T0, 100, same, TIMERS)
        store.record(rec.key, "skipped", "missed", now=T0)
        assert store.claim_backfills(T0, 100, same, TIMERS) == []
        assert store.get_backfill(SCOPE, "r1").next_at == PAST[0] + SECOND  # type: ignore[union-attr]

    def test_only_idle_live_routines_that_are_not_due_are_claimed(self, store: Store) -> None:
        _idle(store, "idle")
        register(store, "due", next_due_at=T0, last_fire=T0 - 10 * MINUTE)
        _idle(store, "busy")
        _idle(store, "paused")
        _idle(store, "off")
        _idle(store, "gone")
        for rid in ("idle", "due", "busy", "paused", "off", "gone"):
            store.put_backfill(_range(rid), now=T0)
        store.claim_manual(RunKey.of(SCOPE, "busy", "manual:01"), now=T0, expires_at=T0 + HOUR, resend_at=T0)
        store.set_paused(SCOPE, "paused", "manual", now=T0, next_due_at=None)
        store.set_enabled(SCOPE, "off", False, now=T0, next_due_at=None)
        store.delete_routine(SCOPE, "gone", now=T0)
        claimed = store.claim_backfills(T0, 100, _plan(PAST), TIMERS)  # type: ignore[arg-type]
        assert [r.routine_id for r in claimed] == ["idle"]
        assert store.get_backfill(SCOPE, "paused").pending  # type: ignore[union-attr]
        # the due routine's live fire first; once it is past due its backfill goes on
        later = store.claim_backfills(T0 - MINUTE, 100, _plan(PAST), TIMERS)  # type: ignore[arg-type]
        assert [r.routine_id for r in later] == ["due"]

    def test_limit_and_a_plan_that_fails_or_declines(self, store: Store) -> None:
        for rid in ("a", "b", "c"):
            _idle(store, rid)
            store.put_backfill(_range(rid), now=T0)

        def plan(routine: Routine, row: Backfill) -> BackfillStep | None:
            if routine.routine_id == "a":
                raise ValueError("cannot plan")
            if routine.routine_id == "b":
                return None
            return _plan(PAST)(routine, row)  # type: ignore[operator, no-any-return]

        assert [r.routine_id for r in store.claim_backfills(T0, 100, plan, TIMERS)] == ["c"]
        assert store.get_backfill(SCOPE, "a").next_at == PAST[0]  # type: ignore[union-attr]
        assert store.get_backfill(SCOPE, "b").next_at == PAST[0]  # type: ignore[union-attr]
        assert len(store.claim_backfills(T0, 1, _plan(PAST), TIMERS)) == 1  # type: ignore[arg-type]

    def test_no_pending_backfill_claims_nothing(self, store: Store) -> None:
        _idle(store)
        assert store.claim_backfills(T0, 100, _plan(PAST), TIMERS) == []  # type: ignore[arg-type]

    # ------------------------------------------------------------------ cancel

    def test_cancel_skips_the_claimed_backfill_run_once(self, store: Store) -> None:
        _idle(store)
        assert store.cancel_backfill(SCOPE, "r1", now=T0) == (None, None)
        store.put_backfill(_range(), now=T0)
        [rec] = store.claim_backfills(T0, 100, _plan(PAST), TIMERS)  # type: ignore[arg-type]
        row, gone = store.cancel_backfill(SCOPE, "r1", now=T0 + MINUTE)
        assert row is not None and row.cancelled_at == T0 + MINUTE and not row.pending
        assert gone is not None and (gone.run_id, gone.state, gone.reason) == (rec.run_id, "skipped", "operator")
        assert gone.finished_at == T0 + MINUTE and store.get(rec.key) == gone
        assert store.cancel_backfill(SCOPE, "r1", now=T0 + HOUR) == (row, None)
        assert store.claim_backfills(T0, 100, _plan(PAST), TIMERS) == []  # type: ignore[arg-type]

    def test_cancel_leaves_a_started_backfill_run_and_other_runs_alone(self, store: Store) -> None:
        _idle(store)
        store.put_backfill(_range(), now=T0)
        [rec] = store.claim_backfills(T0, 100, _plan(PAST), TIMERS)  # type: ignore[arg-type]
        store.start(rec.key, now=T0)
        _, gone = store.cancel_backfill(SCOPE, "r1", now=T0)
        assert gone is None and store.get(rec.key).state == "running"  # type: ignore[union-attr]
        register(store, "m", next_due_at=T0 + HOUR)
        store.put_backfill(_range("m"), now=T0)
        store.claim_manual(RunKey.of(SCOPE, "m", "manual:01"), now=T0, expires_at=T0 + HOUR, resend_at=T0)
        _, none = store.cancel_backfill(SCOPE, "m", now=T0)
        assert none is None and store.get(RunKey.of(SCOPE, "m", "manual:01")).state == "claimed"  # type: ignore[union-attr]

    # ------------------------------------------------------------------ prune and pruned_through

    def test_prune_raises_pruned_through_to_the_latest_deleted_fire(self, store: Store) -> None:
        register(store, next_due_at=T0)
        rec = running(store, now=T0)
        store.finish(rec.key, RunResult.completed("ok"), now=T0, timers=TIMERS)
        register(store, "manual_only", next_due_at=T0 + HOUR)
        key = RunKey.of(SCOPE, "manual_only", "manual:01")
        store.claim_manual(key, now=T0, expires_at=T0 + HOUR, resend_at=T0)
        store.record(key, "skipped", "missed", now=T0)
        register(store, "open", next_due_at=T0)
        claim(store, "open", now=T0)
        assert store.prune(T0 + MINUTE) == 2
        assert store.get_routine(SCOPE, "r1").pruned_through == T0  # type: ignore[union-attr]
        assert store.get_routine(SCOPE, "manual_only").pruned_through is None  # type: ignore[union-attr]
        assert store.get_routine(SCOPE, "open").pruned_through is None  # type: ignore[union-attr]
        assert store.prune(T0 + MINUTE) == 0
        assert store.get_routine(SCOPE, "r1").pruned_through == T0  # type: ignore[union-attr]

    def test_prune_never_lowers_pruned_through(self, store: Store) -> None:
        register(store, next_due_at=T0)
        late = running(store, now=T0)
        store.finish(late.key, RunResult.completed("ok"), now=T0, timers=TIMERS)
        store.prune(T0 + MINUTE)
        store.put_backfill(_range(), now=T0)
        [old] = store.claim_backfills(T0, 100, _plan(PAST), TIMERS)  # type: ignore[arg-type]
        store.record(old.key, "skipped", "missed", now=T0)
        store.prune(T0 + 2 * MINUTE)  # deletes a fire older than pruned_through
        assert store.get_routine(SCOPE, "r1").pruned_through == T0  # type: ignore[union-attr]

    # ------------------------------------------------------------------ routines of every scope

    def test_system_routines_filters_by_kind_and_state_and_counts_per_scope(self, store: Store) -> None:
        register(store, "a", kind="test")
        register(store, "b", kind="other")
        register(store, "done", next_due_at=None)
        register(store, "p")
        store.set_paused(SCOPE, "p", "manual", now=T0, next_due_at=None)
        register(store, "d")
        store.set_enabled(SCOPE, "d", False, now=T0, next_due_at=None)
        register(store, "x")
        store.delete_routine(SCOPE, "x", now=T0)
        register(store, "e", scope=OTHER_ORG)
        store.claim_due(T0, 100, lambda r: (_ for _ in ()).throw(ValueError("bad")), TIMERS)  # defers a, b, e

        def ids(**kw: object) -> list[str]:
            return [f"{r.org}/{r.routine_id}" for r in store.system_routines(**kw)]  # type: ignore[arg-type]

        assert ids() == ["org-a/a", "org-a/b", "org-a/d", "org-a/done", "org-a/p", "org-b/e"]
        assert ids(kind="other") == ["org-a/b"]
        assert ids(state="enabled") == ["org-a/a", "org-a/b", "org-b/e"]
        assert ids(state="paused") == ["org-a/p"]
        assert ids(state="disabled") == ["org-a/d"]
        assert ids(state="finished") == ["org-a/done"]
        assert ids(state="erroring") == ["org-a/a", "org-a/b", "org-b/e"]
        assert ids(kind="other", state="erroring") == ["org-a/b"]
        assert ids(limit=2) == ["org-a/a", "org-a/b"]
        assert ids(after=("org-a", "user-1", "p")) == ["org-b/e"]
        assert store.system_routine_counts() == [("org-a", "user-1", 5), ("org-b", "user-1", 1)]
        erroring = store.system_routine_counts(state="erroring", kind="test")
        assert erroring == [("org-a", "user-1", 1), ("org-b", "user-1", 1)]
        assert store.system_routine_counts(kind="nope") == []
        with pytest.raises(InvalidInput):
            store.system_routines(state="deleted")
        with pytest.raises(InvalidInput):
            store.system_routine_counts(state="running")
