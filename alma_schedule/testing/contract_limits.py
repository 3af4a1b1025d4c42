"""Contract: ``max_runs`` counts STARTS (:mod:`alma_schedule.policies.limits`).
docs/architecture.md, section "The modules, in detail" (testing/contract_limits.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta

from alma_schedule.model import ClaimResult, Fire, Routine, RunKey, RunResult
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    SCOPE,
    T0,
    TIMERS,
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


def _limit(n: int) -> dict[str, int]:
    return {"every": 60, "max_runs": n}


def _row(store: Store, rid: str = "r1") -> Routine:
    row = store.get_routine(SCOPE, rid)
    assert row is not None
    return row


def _start(store: Store, key: RunKey, at: datetime) -> ClaimResult:
    return store.start(key, now=at, owner="worker-1")


def _finish(store: Store, key: RunKey, at: datetime) -> None:
    assert store.finish(key, RunResult.completed("ok"), now=at, timers=TIMERS).won


class LimitsContract:
    def test_a_new_routine_counts_from_zero(self, store: Store) -> None:
        row = register(store, schedule=_limit(2))
        assert (row.schedule_starts, row.schedule_claims) == (0, 0)

    def test_starts_count_and_the_one_reaching_the_limit_clears_the_index(self, store: Store) -> None:
        register(store, schedule=_limit(2))
        decide = limited(2)
        [first] = store.claim_due(T0, 10, decide, TIMERS).claimed
        row = _row(store)
        assert (row.schedule_starts, row.next_due_at) == (0, T0 + MINUTE), "a claim is no start"
        won = _start(store, first.key, T0)
        assert won.won and won.routine is not None and won.routine.schedule_starts == 1, won
        assert _row(store).schedule_starts == 1 and _row(store).next_due_at == T0 + MINUTE
        _finish(store, first.key, T0 + 30 * timedelta(seconds=1))
        [second] = store.claim_due(T0 + MINUTE, 10, decide, TIMERS).claimed
        assert second.run_id == fire_id(T0 + MINUTE)
        last = _start(store, second.key, T0 + MINUTE)
        assert last.won and last.routine is not None, last
        assert (last.routine.schedule_starts, last.routine.next_due_at) == (2, None), "the start's own write"
        row = _row(store)
        assert (row.schedule_starts, row.next_due_at, row.schedule_claims) == (2, None, 2), "the limit clears the index"
        _finish(store, second.key, T0 + MINUTE)
        assert store.claim_due(T0 + HOUR, 10, decide, TIMERS).claimed == ()

    def test_claims_that_never_start_give_their_slot_back(self, store: Store) -> None:
        # the workers down: max_runs 2 used to finish the routine with zero executions
        register(store, schedule=_limit(2))
        decide = limited(2)
        [a] = store.claim_due(T0, 10, decide, TIMERS).claimed
        batch = store.claim_due(T0 + MINUTE, 10, decide, TIMERS)
        assert [(r.run_id, r.reason) for r in batch.skipped] == [(a.run_id, "missed")]  # superseded
        [b] = batch.claimed
        lost = _start(store, a.key, T0 + MINUTE)
        assert (lost.won, lost.reason) == (False, "superseded")
        assert store.take_resends(T0 + 2 * HOUR, 10, TIMERS).expired[0].key == b.key  # expired, never started
        row = _row(store)
        assert (row.schedule_claims, row.schedule_starts) == (2, 0), "two claims, no start: nothing used"
        assert row.next_due_at == T0 + 2 * MINUTE, "still due: both slots are left"
        [c] = store.claim_due(T0 + 2 * HOUR, 10, decide, TIMERS).claimed
        assert _start(store, c.key, T0 + 2 * HOUR).won
        assert _row(store).schedule_starts == 1

    def test_a_start_over_the_limit_ends_skipped_finished(self, store: Store) -> None:
        routine = register(store, schedule=_limit(2))
        decide = limited(2)
        [a] = store.claim_due(T0, 10, decide, TIMERS).claimed
        assert _start(store, a.key, T0).won
        _finish(store, a.key, T0)
        [b] = store.claim_due(T0 + MINUTE, 10, decide, TIMERS).claimed
        lowered = dataclasses.replace(routine, schedule=_limit(1), config_revision="rev-lowered")
        store.put_routine(lowered, now=T0 + MINUTE, expected_revision=routine.config_revision)
        over = _start(store, b.key, T0 + MINUTE)
        assert (over.won, over.reason) == (False, "finished"), over
        assert over.record is not None and (over.record.state, over.record.reason) == ("skipped", "finished")
        assert over.record.started_at is None and over.record.owner is None, "nothing started"
        assert _row(store).schedule_starts == 1, "a refused start counts nothing"
        again = _start(store, b.key, T0 + MINUTE)
        assert (again.won, again.record.state if again.record else None) == (False, "skipped")

    def test_manual_backfill_and_unlimited_starts_do_not_count(self, store: Store) -> None:
        register(store, schedule=_limit(1))
        register(store, "free")
        key = RunKey.of(SCOPE, "r1", "manual:01")
        assert store.claim_manual(key, now=T0, expires_at=T0 + HOUR, resend_at=T0 + HOUR).won
        assert _start(store, key, T0).won
        _finish(store, key, T0)
        [free] = [r for r in store.claim_due(T0, 10, limited(None), TIMERS).claimed if r.routine_id == "free"]
        assert _start(store, free.key, T0).won
        assert (_row(store).schedule_starts, _row(store, "free").schedule_starts) == (0, 0)
        assert _row(store).next_due_at is not None, "a manual run of a one-off leaves its schedule alone"

    def test_a_skipped_start_counts_nothing(self, store: Store) -> None:
        register(store, schedule=_limit(1))
        [rec] = store.claim_due(T0, 10, limited(1), TIMERS).claimed
        store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        res = _start(store, rec.key, T0)
        assert (res.won, res.reason) == (False, "paused")
        assert _row(store).schedule_starts == 0

    def test_re_registration_keeps_the_count_and_a_new_incarnation_restarts_it(self, store: Store) -> None:
        routine = register(store, schedule=_limit(1))
        [rec] = store.claim_due(T0, 10, limited(1), TIMERS).claimed
        assert _start(store, rec.key, T0).won
        stale = dataclasses.replace(routine, schedule_starts=0, schedule_claims=0, definition={"text": "changed"})
        again = store.put_routine(
            dataclasses.replace(stale, config_revision="rev-2"), now=T0, expected_revision=routine.config_revision
        )
        assert (again.schedule_starts, again.schedule_claims) == (1, 1), "re-registration never resets the counts"
        _finish(store, rec.key, T0 + HOUR)
        store.delete_routine(SCOPE, "r1", now=T0)
        fresh = store.put_routine(dataclasses.replace(routine, schedule_starts=7, schedule_claims=7), now=T0 + HOUR)
        assert (fresh.schedule_starts, fresh.schedule_claims) == (0, 0), "a new incarnation counts from zero"

    def test_a_batch_counts_each_limited_routine_claim_once(self, store: Store) -> None:
        ids = [f"r{i}" for i in range(5)]
        for rid in ids:
            register(store, rid, schedule=_limit(2))
        assert len(store.claim_due(T0, 10, limited(2), TIMERS).claimed) == 5
        assert {(_row(store, rid).schedule_claims, _row(store, rid).schedule_starts) for rid in ids} == {(1, 0)}
