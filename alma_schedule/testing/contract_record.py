"""Contract: the operator's ``record`` settles AT THE RECORDED COST (the cost given, else the stored one)."""

from __future__ import annotations

from typing import Any

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import BlockedWhy, Ceiling, RunRecord
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import DAY, MINUTE, T0, everything, run_in

ORG = "org:org-a"
ROUTINE = "routine:org-a/user-1/r1"


def _reserved(store: Store, amount: int = 3_000, state: str = "running") -> RunRecord:
    rec = run_in(store, "running")
    res = store.reserve(rec.key, DAY, amount, [Ceiling(ROUTINE, 8_000), Ceiling(ORG, 100_000)])
    assert res.ok and res.record is not None, res
    if state == "submitted":
        assert store.submit(rec.key, now=T0, batch_id="b", deadline=T0 + MINUTE, next_poll_at=T0).won
    return res.record


class RecordCostContract:
    @pytest.mark.parametrize("state", ["running", "submitted"])
    def test_record_settles_at_the_cost_given(self, store: Store, state: str) -> None:
        rec = _reserved(store, 3_000, state)
        res = store.record(rec.key, "failed", "provider_error", now=T0 + MINUTE, cost_micros=5_040)
        assert res.won and res.record is not None
        assert (res.record.cost_micros, res.record.reserved_micros) == (5_040, 0)
        assert (store.spend(ROUTINE, DAY), store.spend(ORG, DAY)) == (5_040, 5_040)  # what was billed
        assert store.get(rec.key) == res.record

    def test_record_without_a_cost_settles_at_the_stored_one(self, store: Store) -> None:
        rec = _reserved(store, 3_000)
        assert store.mark_blocked(rec.key, why=BlockedWhy.UNCERTAIN_OUTCOME, now=T0, cost_micros=3_000)
        res = store.record(rec.key, "failed", "provider_error", now=T0 + MINUTE)
        assert res.won and res.record is not None
        assert (res.record.cost_micros, store.spend(ROUTINE, DAY)) == (3_000, 3_000)  # the bound, never 0

    def test_a_cost_of_zero_releases_and_a_run_without_reservation_keeps_the_cost(self, store: Store) -> None:
        rec = _reserved(store, 3_000)
        res = store.record(rec.key, "completed", "reconciled", now=T0 + MINUTE, cost_micros=0)
        assert res.won and res.record is not None and res.record.cost_micros == 0
        assert store.spend(ROUTINE, DAY) == 0
        plain = run_in(store, "running", "r2")
        done = store.record(plain.key, "completed", "reconciled", now=T0, cost_micros=70)
        assert done.record is not None and (done.record.cost_micros, done.record.reserved_micros) == (70, 0)

    def test_a_terminal_run_is_not_recorded_again_whatever_the_cost(self, store: Store) -> None:
        rec = _reserved(store, 3_000)
        assert store.record(rec.key, "failed", "provider_error", now=T0, cost_micros=100).won
        before = everything(store)
        res = store.record(rec.key, "completed", "reconciled", now=T0 + MINUTE, cost_micros=9_999)
        assert (res.won, res.reason) == (False, "duplicate")
        assert everything(store) == before and store.spend(ROUTINE, DAY) == 100

    @pytest.mark.parametrize("cost", [-1, True, 1.5, "5040", float("nan")])
    def test_a_bad_cost_is_refused_and_writes_nothing(self, store: Store, cost: Any) -> None:
        rec = _reserved(store, 3_000)
        before = everything(store)
        with pytest.raises(InvalidInput, match="cost_micros"):
            store.record(rec.key, "failed", "provider_error", now=T0, cost_micros=cost)
        assert everything(store) == before and store.spend(ROUTINE, DAY) == 3_000
