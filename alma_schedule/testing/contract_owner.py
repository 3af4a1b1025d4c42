"""Contract: the owner of a run: ``start(..., owner=)`` writes it, ``running_of`` finds
the running runs of one Celery request id (its own owner, or ``<id>/<key>`` of a packed fire)."""

from __future__ import annotations

from typing import Any

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import RunKey, RunResult, RunState
from alma_schedule.policies.ownership import MAX_OWNER_LENGTH, owner_of
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import T0, TIMERS, claim, everything, register, with_threshold

REQUEST = "7c0e1a52-1d1f-4c55-9e0b-2f6f4c8f0d11"


def _started(store: Store, routine_id: str, owner: str | None) -> RunKey:
    register(store, routine_id, next_due_at=T0)
    rec = claim(store, routine_id, now=T0)
    res = store.start(rec.key, now=T0, owner=owner)
    assert res.won and res.record is not None and res.record.owner == owner
    return rec.key


class OwnerContract:
    def test_start_writes_the_owner_and_get_reads_it(self, store: Store) -> None:
        key = _started(store, "r1", REQUEST)
        got = store.get(key)
        assert got is not None and (got.state, got.owner) == (RunState.RUNNING, REQUEST)
        none = _started(store, "r2", None)
        got = store.get(none)
        assert got is not None and got.owner is None

    def test_running_of_finds_a_single_run_and_the_fires_of_a_packed_message(self, store: Store) -> None:
        single = _started(store, "r1", REQUEST)
        batch = []
        for i in range(2):  # two fires of one run_many message: <request id>/<key> each
            register(store, f"b{i}", next_due_at=T0)
            rec = claim(store, f"b{i}", now=T0)
            assert store.start(rec.key, now=T0, owner=owner_of(REQUEST, rec.key)).won
            batch.append(rec.key)
        other = _started(store, "o1", "other-request")
        _started(store, "n1", None)
        assert [r.key for r in store.running_of(REQUEST)] == [*batch, single]  # key order
        assert [r.key for r in store.running_of("other-request")] == [other]
        assert store.running_of("nobody") == []

    def test_a_prefix_is_no_owner_and_case_and_wildcards_match_exactly(self, store: Store) -> None:
        _started(store, "r1", "abcd/org-a/user-1/r1/x")
        _started(store, "r2", "ABC")
        _started(store, "r3", "a_c")
        _started(store, "r4", "100%")
        assert store.running_of("abc") == []  # "abc/" is not a prefix of "abcd/..."
        assert [r.routine_id for r in store.running_of("ABC")] == ["r2"]
        assert [r.routine_id for r in store.running_of("a_c")] == ["r3"]
        assert store.running_of("a%") == [] and store.running_of("abc_") == []
        assert [r.routine_id for r in store.running_of("100%")] == ["r4"]
        assert [r.routine_id for r in store.running_of("abcd")] == ["r1"]

    def test_only_running_runs_are_found(self, store: Store) -> None:
        done = _started(store, "r1", REQUEST)
        assert store.finish(done, RunResult.completed(), now=T0, timers=TIMERS).won
        out = _started(store, "r2", REQUEST)
        assert store.submit(out, now=T0, batch_id="b", deadline=T0, next_poll_at=T0).won
        assert store.running_of(REQUEST) == []
        got = store.get(done)
        assert got is not None and got.owner == REQUEST  # kept on the terminal row, as history

    def test_the_limit_bounds_the_read(self, store: Store) -> None:
        for i in range(3):
            register(store, f"r{i}", next_due_at=T0)
            rec = claim(store, f"r{i}", now=T0)
            assert store.start(rec.key, now=T0, owner=owner_of(REQUEST, rec.key)).won
        assert [r.routine_id for r in store.running_of(REQUEST, limit=2)] == ["r0", "r1"]
        assert store.running_of(REQUEST, limit=0) == []

    def test_a_worker_lost_failure_never_counts_for_the_streak(self, store: Store) -> None:
        key = _started(store, "r1", REQUEST)
        lost = RunResult.failed("worker_lost", error_class="WorkerLostError")
        done = store.finish(key, lost, now=T0, timers=with_threshold(1))
        assert done.won and done.record is not None and done.record.reason == "worker_lost"
        row = store.get_routine(key.scope, "r1")
        assert row is not None and (row.consecutive_failures, row.paused_reason) == (0, None)

    @pytest.mark.parametrize(
        "owner", ["", "x" * (MAX_OWNER_LENGTH + 1), "a\x00b", 42, b"bytes", ["a"]], ids=lambda v: repr(v)[:12]
    )
    def test_a_bad_owner_is_refused_and_writes_nothing(self, store: Store, owner: Any) -> None:
        register(store, "r1", next_due_at=T0)
        rec = claim(store, "r1", now=T0)
        before = everything(store)
        with pytest.raises(InvalidInput, match="owner"):
            store.start(rec.key, now=T0, owner=owner)
        assert everything(store) == before
        with pytest.raises(InvalidInput, match="owner"):
            store.running_of(owner)

    @pytest.mark.parametrize("limit", [-1, 1.5, "2", True, None], ids=repr)
    def test_a_bad_limit_is_refused(self, store: Store, limit: Any) -> None:
        with pytest.raises(InvalidInput, match="limit"):
            store.running_of(REQUEST, limit=limit)
