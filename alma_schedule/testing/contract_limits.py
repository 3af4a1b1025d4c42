"""Contract: ``max_runs`` (issue 15): ``routines.schedule_claims`` counts claimed schedule fires inside
``claim_due``, and the claim that reaches the limit clears ``next_due_at`` in the same transaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta

from alma_schedule.model import Fire, Routine, RunKey, RunResult
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    SCOPE,
    T0,
    TIMERS,
    fire_due_long,
    fire_id,
    fire_next_due,
    register,
)


def limited(max_runs: int | None, *, missed: bool = False, step: timedelta = MINUTE) -> Callable[[Routine], Fire]:
    """A ``decide`` firing ``next_due_at`` like :func:`fire_next_due`, carrying ``max_runs``."""
    inner = fire_next_due(step, window=HOUR, missed=missed)

    def decide(routine: Routine) -> Fire:
        fire: Fire = inner(routine)
        return dataclasses.replace(fire, max_runs=max_runs)

    return decide


def _row(store: Store, rid: str = "r1") -> Routine:
    row = store.get_routine(SCOPE, rid)
    assert row is not None
    return row


def _finish(store: Store, run_id: str, rid: str = "r1", *, at: datetime | None = None) -> None:
    key = RunKey.of(SCOPE, rid, run_id)
    now = T0 + HOUR if at is None else at
    assert store.start(key, now=now).won
    assert store.finish(key, RunResult.completed("ok"), now=now, timers=TIMERS).won


class LimitsContract:
    def test_a_new_routine_counts_from_zero(self, store: Store) -> None:
        assert register(store).schedule_claims == 0

    def test_claimed_fires_count_and_the_last_one_clears_the_index(self, store: Store) -> None:
        register(store)
        decide = limited(2)
        [first] = store.claim_due(T0, 10, decide, TIMERS).claimed
        row = _row(store)
        assert row.schedule_claims == 1 and row.next_due_at == T0 + MINUTE
        _finish(store, first.run_id, at=T0 + 30 * timedelta(seconds=1))
        [second] = store.claim_due(T0 + MINUTE, 10, decide, TIMERS).claimed
        assert second.run_id == fire_id(T0 + MINUTE)
        row = _row(store)
        assert row.schedule_claims == 2 and row.next_due_at is None, "the limit clears the index"
        assert row.last_fire == T0 + MINUTE
        assert store.claim_due(T0 + HOUR, 10, decide, TIMERS).claimed == ()

    def test_a_superseding_claim_counts_and_nothing_is_given_back(self, store: Store) -> None:
        register(store)
        decide = limited(5)
        store.claim_due(T0, 10, decide, TIMERS)
        batch = store.claim_due(T0 + MINUTE, 10, decide, TIMERS)
        assert [r.state for r in batch.skipped] == ["skipped"] and len(batch.claimed) == 1  # superseded
        assert _row(store).schedule_claims == 2

    def test_skipped_fires_do_not_count(self, store: Store) -> None:
        register(store)
        register(store, "r2")
        store.claim_due(T0, 10, limited(3, missed=True), TIMERS)
        assert [_row(store, r).schedule_claims for r in ("r1", "r2")] == [0, 0], "missed fires do not count"
        [rec, _] = store.claim_due(T0 + MINUTE, 10, limited(3), TIMERS).claimed
        assert store.start(rec.key, now=T0 + MINUTE).won
        batch = store.claim_due(T0 + 2 * MINUTE, 10, limited(3), TIMERS)
        overlap = [r for r in batch.skipped if r.routine_id == rec.routine_id]
        assert [(r.state, r.reason) for r in overlap] == [("skipped", "overlap")]
        assert _row(store, rec.routine_id).schedule_claims == 1, "an overlap skip does not count"

    def test_manual_claims_do_not_count(self, store: Store) -> None:
        register(store)
        key = RunKey.of(SCOPE, "r1", "manual:01")
        assert store.claim_manual(key, now=T0, expires_at=T0 + HOUR, resend_at=T0 + HOUR).won
        assert _row(store).schedule_claims == 0

    def test_routines_without_a_limit_are_not_counted(self, store: Store) -> None:
        register(store)
        register(store, "r2")

        def mixed(routine: Routine) -> Fire:
            fire: Fire = fire_due_long(routine)
            return dataclasses.replace(fire, max_runs=1) if routine.routine_id == "r2" else fire

        batch = store.claim_due(T0, 10, mixed, TIMERS)
        assert len(batch.claimed) == 2, "both claimed in one batch"
        r1, r2 = _row(store, "r1"), _row(store, "r2")
        assert (r1.schedule_claims, r1.next_due_at) == (0, T0 + MINUTE)
        assert (r2.schedule_claims, r2.next_due_at) == (1, None)

    def test_a_batch_counts_each_limited_routine_once(self, store: Store) -> None:
        ids = [f"r{i}" for i in range(5)]
        for rid in ids:
            register(store, rid)
        assert len(store.claim_due(T0, 10, limited(2), TIMERS).claimed) == 5
        assert {_row(store, rid).schedule_claims for rid in ids} == {1}

    def test_re_registration_keeps_the_count_and_a_new_incarnation_restarts_it(self, store: Store) -> None:
        routine = register(store)
        store.claim_due(T0, 10, limited(1), TIMERS)
        stale = dataclasses.replace(routine, schedule_claims=0, definition={"text": "changed"})
        again = store.put_routine(
            dataclasses.replace(stale, config_revision="rev-2"), now=T0, expected_revision=routine.config_revision
        )
        assert again.schedule_claims == 1, "re-registration never resets (nor writes) the count"
        _finish(store, store.list_runs(SCOPE, routine_id="r1")[0].run_id)
        store.delete_routine(SCOPE, "r1", now=T0)
        fresh = store.put_routine(dataclasses.replace(routine, schedule_claims=7), now=T0 + HOUR)
        assert fresh.schedule_claims == 0, "a new incarnation counts from zero"
