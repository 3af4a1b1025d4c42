"""Contract: reservations against daily ceilings (reserve, release, settlement by finish and record)."""

from __future__ import annotations

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import MAX_ID_LENGTH, Ceiling, RunKey, RunRecord, RunResult, Scope
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import DAY, HOUR, SCOPE, T0, TIMERS, register, run_in, running

ROUTINE = "routine:org-a/user-1/r1"
ORG = "org:org-a"


def _both(routine_limit: int = 1_000, org_limit: int = 10_000) -> list[Ceiling]:
    return [Ceiling(ROUTINE, routine_limit), Ceiling(ORG, org_limit)]


def _reserved(store: Store, amount: int = 100) -> RunRecord:
    rec = run_in(store, "running")
    res = store.reserve(rec.key, DAY, amount, _both())
    assert res.ok and res.ceiling is None and res.record is not None, res
    return res.record


class MoneyContract:
    def test_reserve_counts_against_every_ceiling(self, store: Store) -> None:
        rec = _reserved(store, 100)
        assert (rec.reserved_micros, rec.reserve_day) == (100, DAY)
        assert set(rec.reserve_ceilings) == {ROUTINE, ORG}
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == rec
        assert (store.spend(ROUTINE, DAY), store.spend(ORG, DAY)) == (100, 100)
        assert store.spend(ORG, "2026-03-02") == 0

    def test_reserve_is_all_or_nothing(self, store: Store) -> None:
        rec = run_in(store, "running")
        res = store.reserve(rec.key, DAY, 600, _both(routine_limit=1_000, org_limit=500))
        assert (res.ok, res.ceiling) == (False, ORG)
        assert (store.spend(ROUTINE, DAY), store.spend(ORG, DAY)) == (0, 0)
        after = store.get(RunKey.of(SCOPE, "r1", rec.run_id))
        assert after is not None and after.reserved_micros == 0

    def test_reserve_names_the_first_ceiling_exceeded(self, store: Store) -> None:
        rec = run_in(store, "running")
        res = store.reserve(rec.key, DAY, 600, _both(routine_limit=500, org_limit=500))
        assert (res.ok, res.ceiling) == (False, ROUTINE)

    def test_reserve_up_to_the_limit_exactly(self, store: Store) -> None:
        rec = run_in(store, "running")
        assert store.reserve(rec.key, DAY, 500, _both(routine_limit=500, org_limit=500)).ok
        other = run_in(store, "running", "r2")
        res = store.reserve(other.key, DAY, 1, [Ceiling(ORG, 500)])
        assert (res.ok, res.ceiling) == (False, ORG)
        assert store.spend(ORG, DAY) == 500

    def test_only_a_running_run_reserves(self, store: Store) -> None:
        rec = run_in(store, "claimed")
        res = store.reserve(rec.key, DAY, 10, _both())
        assert res.ok is False and res.ceiling is None
        assert store.spend(ORG, DAY) == 0

    def test_release_gives_the_reservation_back(self, store: Store) -> None:
        rec = _reserved(store, 100)
        out = store.release(rec.key)
        assert out is not None and out.reserved_micros == 0
        assert (store.spend(ROUTINE, DAY), store.spend(ORG, DAY)) == (0, 0)
        again = store.release(rec.key)
        assert again is not None and again.reserved_micros == 0
        assert store.spend(ORG, DAY) == 0

    def test_finish_settles_to_the_cost(self, store: Store) -> None:
        rec = _reserved(store, 100)
        res = store.finish(rec.key, RunResult.completed("delivered", 30), now=T0 + HOUR, timers=TIMERS)
        assert res.record is not None and (res.record.reserved_micros, res.record.cost_micros) == (0, 30)
        assert (store.spend(ROUTINE, DAY), store.spend(ORG, DAY)) == (30, 30)

    def test_finish_without_a_cost_settles_the_recorded_cost(self, store: Store) -> None:
        rec = _reserved(store, 100)
        store.annotate(rec.key, {"cost_micros": 40})
        store.finish(rec.key, RunResult.failed("provider_error"), now=T0 + HOUR, timers=TIMERS)
        assert (store.spend(ROUTINE, DAY), store.spend(ORG, DAY)) == (40, 40)

    def test_record_settles_or_releases(self, store: Store) -> None:
        rec = _reserved(store, 100)
        res = store.record(RunKey.of(SCOPE, "r1", rec.run_id), "failed", "reconciled", now=T0 + HOUR)
        assert res.record is not None and res.record.reserved_micros == 0
        assert store.spend(ORG, DAY) == 0, "an orphan reservation with no recorded cost is released"
        rec2 = run_in(store, "running", "r2")
        assert store.reserve(rec2.key, DAY, 100, [Ceiling(ORG, 10_000)]).ok
        store.annotate(rec2.key, {"cost_micros": 25})
        store.record(RunKey.of(SCOPE, "r2", rec2.run_id), "completed", "reconciled", now=T0 + HOUR)
        assert store.spend(ORG, DAY) == 25

    def test_ceiling_keys_of_max_length_ids(self, store: Store) -> None:
        """Ids of 200 characters each (multi-byte, a slash in the routine id): the ceiling keys built
        by :class:`Ceiling` stay fixed-length, distinct, and every backend reserves and settles them."""
        n = MAX_ID_LENGTH
        scope = Scope("Ö" * n, "ü" * (n - 1) + "u")
        rid = "r/" + "é" * (n - 2)
        keys = (Ceiling.routine_key(scope.org, scope.uid, rid), Ceiling.org_key(scope.org))
        assert [len(k) for k in keys] == [len("routine:") + 64, len("org:") + 64]
        assert len({*keys, Ceiling.routine_key(scope.org, scope.uid, rid[:-1]), Ceiling.org_key(scope.uid)}) == 4
        register(store, rid, scope=scope, next_due_at=T0)
        rec = running(store, rid)
        naive = f"routine:{scope.org}/{scope.uid}/{rid}"  # what a joined key would be: too long to store
        with pytest.raises(InvalidInput):
            store.reserve(rec.key, DAY, 100, [Ceiling(naive, 1_000)])
        assert store.spend(keys[1], DAY) == 0 and store.get(RunKey.of(scope, rid, rec.run_id)) == rec
        res = store.reserve(rec.key, DAY, 100, [Ceiling(keys[0], 1_000), Ceiling(keys[1], 10_000)])
        assert res.ok and res.record is not None and set(res.record.reserve_ceilings) == set(keys)
        assert (store.spend(keys[0], DAY), store.spend(keys[1], DAY)) == (100, 100)
        done = store.finish(rec.key, RunResult.completed("delivered", 30), now=T0 + HOUR, timers=TIMERS)
        assert done.won and done.record is not None and done.record.reserved_micros == 0
        assert (store.spend(keys[0], DAY), store.spend(keys[1], DAY)) == (30, 30)
