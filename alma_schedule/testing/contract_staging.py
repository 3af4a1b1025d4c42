"""Contract: ``claim_due``'s ``staging`` (the caller's moment to build a batch's messages while the
batch's last writes run): called at most once, with exactly the records the batch then returns as
``claimed``, never with an empty list; an exception from it rolls the batch back; a store may never
call it (the memory store does not)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import RunRecord
from alma_schedule.stores.fast import FastStore
from alma_schedule.testing.builders import MINUTE, SCOPE, T0, TIMERS, fire_due, register, run_in


class _Staged(Exception):
    """Raised by a staging to show that the batch rolls back."""


class StagingContract:
    def test_staging_gets_exactly_the_records_then_claimed_in_their_order(self, store: FastStore) -> None:
        """Three routines due, one blocked by its running run (``skipped(overlap)``: not staged)."""
        run_in(store, "running", "r2")  # r2's fire at T0, started
        for rid in ("r1", "r3"):
            register(store, rid, next_due_at=T0 + MINUTE)
        calls: list[list[RunRecord]] = []

        def staging(runs: Sequence[RunRecord]) -> None:
            calls.append(list(runs))

        batch = store.claim_due(T0 + MINUTE, 10, fire_due, TIMERS, staging=staging)
        assert sorted(r.routine_id for r in batch.claimed) == ["r1", "r3"]
        assert [(r.routine_id, r.reason) for r in batch.skipped] == [("r2", "overlap")]
        assert len(calls) <= 1
        if calls:
            (staged,) = calls
            assert len(staged) == len(batch.claimed)
            assert all(a is b for a, b in zip(staged, batch.claimed, strict=True))  # the same records, in order

    def test_a_batch_that_claims_nothing_stages_nothing(self, store: FastStore) -> None:
        run_in(store, "running")
        calls: list[Sequence[RunRecord]] = []
        batch = store.claim_due(T0 + MINUTE, 10, fire_due, TIMERS, staging=calls.append)
        assert (batch.claimed, calls) == ((), [])
        assert len(batch.skipped) == 1

    def test_an_exception_from_staging_rolls_the_batch_back(self, store: FastStore) -> None:
        register(store, "r1", next_due_at=T0)
        called: list[int] = []

        def staging(runs: Sequence[RunRecord]) -> None:
            called.append(len(runs))
            raise _Staged("the caller's staging failed")

        try:
            store.claim_due(T0, 10, fire_due, TIMERS, staging=staging)
        except _Staged:
            pass
        if not called:
            pytest.skip("this store does not call staging")
        assert called == [1]
        assert store.list_runs(SCOPE, routine_id="r1") == []  # nothing claimed
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.next_due_at == T0 and row.last_fire is None  # the cursor did not move
        assert [r.routine_id for r in store.claim_due(T0, 10, fire_due, TIMERS).claimed] == ["r1"]

    def test_staging_must_be_callable(self, store: FastStore) -> None:
        register(store, "r1", next_due_at=T0)
        with pytest.raises(InvalidInput, match="staging"):
            store.claim_due(T0, 10, fire_due, TIMERS, staging=42)  # type: ignore[arg-type]
        assert store.list_runs(SCOPE, routine_id="r1") == []
