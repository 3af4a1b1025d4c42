"""Contract: the retention of run history, ``prune_runs``: at most ``limit`` TERMINAL runs ended
before ``before``, the oldest first, across every scope; never a non-terminal run; each touched
routine's ``pruned_through`` raised (never lowered) to its latest deleted fire, in the same step."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import RunKey, RunRecord, RunResult, Scope
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    IN_STATE,
    MINUTE,
    OTHER_ORG,
    SCOPE,
    T0,
    TIMERS,
    Decide,
    everything,
    fire_due_long,
    fire_next_due,
    register,
    run_in,
    running,
)
from alma_schedule.testing.store_races import race

DAY = timedelta(days=1)


#: A ``decide`` that fires a routine once (its next fire a thousand days on): a claim of one
#: routine's fire never takes another's.
ONCE = fire_next_due(1000 * DAY, HOUR)


def ended(store: Store, routine_id: str, at: datetime, *, scope: Scope = SCOPE) -> RunRecord:
    """Register ``routine_id`` in ``scope`` due at ``at``; claim, start and complete that one fire at ``at``."""
    register(store, routine_id, next_due_at=at, scope=scope)
    return again(store, routine_id, at, ONCE)


def again(store: Store, routine_id: str, at: datetime, decide: Decide = fire_due_long) -> RunRecord:
    """The routine's fire due at ``at``, run and completed at ``at`` (its next fire a minute on)."""
    rec = running(store, routine_id, now=at, decide=decide)
    res = store.finish(rec.key, RunResult.completed("ok"), now=at, timers=TIMERS)
    assert res.won and res.record is not None and res.record.finished_at == at, res
    return res.record


def present(store: Store, *records: RunRecord) -> list[bool]:
    return [store.get(r.key) is not None for r in records]


class RetentionContract:
    def test_prune_runs_deletes_terminal_runs_ended_before_and_never_an_open_one(self, store: Store) -> None:
        old = ended(store, "done", T0 - 3 * DAY)
        young = ended(store, "young", T0)
        opened = [run_in(store, state, f"open-{state}", now=T0 - 5 * DAY) for state in IN_STATE]
        assert store.prune_runs(T0 - DAY, 100) == 1
        assert present(store, old, young) == [False, True]
        assert all(store.get(r.key) is not None for r in opened)  # ancient, but not ended: kept
        assert store.prune_runs(T0 + DAY, 100) == 1
        assert all(store.get(r.key) is not None for r in opened)
        assert store.prune_runs(T0 + DAY, 100) == 0

    def test_the_bound_is_strict_an_end_at_before_is_kept(self, store: Store) -> None:
        rec = ended(store, "r1", T0)
        assert store.prune_runs(T0, 100) == 0 and present(store, rec) == [True]
        assert store.prune_runs(T0 + timedelta(microseconds=1), 100) == 1

    def test_at_most_limit_runs_go_per_call_the_oldest_first(self, store: Store) -> None:
        ends = [T0 + n * MINUTE for n in (3, 0, 4, 1, 2)]  # registered out of order
        recs = {at: ended(store, f"r{n}", at) for n, at in enumerate(ends)}
        assert store.prune_runs(T0 + HOUR, 2) == 2
        assert [store.get(recs[T0 + n * MINUTE].key) is None for n in range(5)] == [True, True, False, False, False]
        assert store.prune_runs(T0 + HOUR, 2) == 2
        assert store.prune_runs(T0 + HOUR, 2) == 1
        assert store.prune_runs(T0 + HOUR, 2) == 0

    def test_every_scope_is_pruned(self, store: Store) -> None:
        mine = ended(store, "r1", T0)
        theirs = ended(store, "r9", T0, scope=OTHER_ORG)
        assert store.prune_runs(T0 + DAY, 10) == 2
        assert present(store, mine, theirs) == [False, False]

    def test_pruned_through_rises_to_the_latest_deleted_fire_never_down(self, store: Store) -> None:
        register(store, "r1", next_due_at=T0)
        again(store, "r1", T0)
        again(store, "r1", T0 + MINUTE)
        last = again(store, "r1", T0 + 2 * MINUTE)
        register(store, "manual_only", next_due_at=T0 + HOUR)
        key = RunKey.of(SCOPE, "manual_only", "manual:01")
        store.claim_manual(key, now=T0, expires_at=T0 + HOUR, resend_at=T0)
        store.record(key, "skipped", "missed", now=T0)
        assert store.prune_runs(T0 + 90 * timedelta(seconds=1), 10) == 3  # r1's first two and the manual run
        assert store.get_routine(SCOPE, "r1").pruned_through == T0 + MINUTE  # type: ignore[union-attr]
        assert store.get_routine(SCOPE, "manual_only").pruned_through is None  # type: ignore[union-attr]
        assert store.prune_runs(T0 + DAY, 10) == 1
        assert store.get_routine(SCOPE, "r1").pruned_through == last.fire_at  # type: ignore[union-attr]
        assert store.prune_runs(T0 + DAY, 10) == 0
        assert store.get_routine(SCOPE, "r1").pruned_through == last.fire_at  # type: ignore[union-attr]

    def test_a_batch_bounded_by_limit_raises_pruned_through_only_as_far_as_it_deleted(self, store: Store) -> None:
        register(store, "r1", next_due_at=T0)
        again(store, "r1", T0)
        again(store, "r1", T0 + MINUTE)
        kept = again(store, "r1", T0 + 2 * MINUTE)
        assert store.prune_runs(T0 + DAY, 2) == 2
        assert store.get_routine(SCOPE, "r1").pruned_through == T0 + MINUTE  # type: ignore[union-attr]
        assert present(store, kept) == [True]

    def test_concurrent_prunes_delete_each_run_once(self, store: Store) -> None:
        ends = [ended(store, f"r{n:02d}", T0 + n * MINUTE) for n in range(40)]

        def pruner(_: int) -> int:
            total = 0
            while count := store.prune_runs(T0 + DAY, 3):
                total += count
            return total

        assert sum(race(3, pruner)) == len(ends)  # skip-locked batches: disjoint, none lost
        assert present(store, *ends) == [False] * len(ends)
        assert {store.get_routine(SCOPE, r.routine_id).pruned_through for r in ends} == {r.fire_at for r in ends}  # type: ignore[union-attr]

    def test_limit_zero_deletes_nothing(self, store: Store) -> None:
        rec = ended(store, "r1", T0)
        assert store.prune_runs(T0 + DAY, 0) == 0 and present(store, rec) == [True]

    @pytest.mark.parametrize(
        "before, limit",
        [
            (datetime(2026, 3, 5), 10),  # naive
            ("2026-03-05T00:00:00Z", 10),
            (T0 + DAY, "10"),
            (T0 + DAY, 1.5),
            (T0 + DAY, True),
        ],
    )
    def test_bad_input_is_refused_typed_and_deletes_nothing(self, store: Store, before: object, limit: object) -> None:
        ended(store, "r1", T0)
        snapshot = everything(store)
        with pytest.raises(InvalidInput):
            store.prune_runs(before, limit)  # type: ignore[arg-type]
        assert everything(store) == snapshot
