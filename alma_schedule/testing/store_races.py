"""Races every backend must win: threads released together by a barrier, then the ledger is audited.
docs/architecture.md, section "The modules, in detail" (testing/store_races.py).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from alma_schedule.model import NON_TERMINAL, BlockedWhy, Ceiling, ClaimBatch, ClaimResult, RunKey, RunRecord, RunResult
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    DAY,
    HOUR,
    MINUTE,
    SCOPE,
    T0,
    TIMERS,
    fire_due_long,
    fire_id,
    max_runs_decide,
    register,
)

T = TypeVar("T")
ORG = "org:org-a"


def race(workers: int, job: Callable[[int], T]) -> list[T]:
    """Run ``job(i)`` on ``workers`` threads released at once; re-raise the first error."""
    barrier = threading.Barrier(workers)

    def go(i: int) -> T:
        barrier.wait(timeout=120)
        return job(i)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(go, i) for i in range(workers)]
        return [f.result(timeout=600) for f in futures]


def _ids(n: int) -> list[str]:
    return [f"r{i:05d}" for i in range(n)]


def _claim_all(store: Store, now: Any = T0) -> list[RunRecord]:
    out: list[RunRecord] = []
    while True:
        batch = store.claim_due(now, 1000, fire_due_long, TIMERS)
        if not (batch.claimed or batch.skipped or batch.deferred):
            return out
        out += batch.claimed


def _running(store: Store, n: int) -> list[RunRecord]:
    for rid in _ids(n):
        register(store, rid)
    out = []
    for rec in _claim_all(store):
        res = store.start(rec.key, now=T0)
        assert res.won and res.record is not None
        out.append(res.record)
    return out


def _non_terminal(runs: Sequence[RunRecord]) -> list[RunRecord]:
    return [r for r in runs if not r.terminal]


class StoreRaceContract:
    """Concurrent callers on one store. Provide a ``store`` fixture; ``race_scale`` scales N."""

    race_scale: float = 1.0

    def scaled(self, n: int, minimum: int = 20) -> int:
        return max(minimum, int(n * self.race_scale))

    def test_16_claimers_claim_each_fire_once(self, store: Store) -> None:
        n = self.scaled(1000)
        for rid in _ids(n):
            register(store, rid)

        def claimer(_: int) -> list[RunRecord]:
            mine: list[RunRecord] = []
            while True:
                batch = store.claim_due(T0, 50, fire_due_long, TIMERS)
                assert batch.skipped == () and batch.deferred == ()
                if not batch.claimed:
                    return mine
                mine += batch.claimed

        claimed = [rec for mine in race(16, claimer) for rec in mine]
        keys = Counter(r.key for r in claimed)
        assert len(keys) == n and set(keys.values()) == {1}, "each fire claimed exactly once"
        assert store.claim_due(T0, 1000, fire_due_long, TIMERS).claimed == ()
        routines = list(store.iter_routines())
        assert len(routines) == n
        assert all(r.last_fire == T0 and r.next_due_at == T0 + MINUTE for r in routines)
        runs = store.list_runs(SCOPE, limit=10 * n)
        assert len(runs) == n and {r.state for r in runs} == {"claimed"}

    def test_16_claimers_count_each_collapsed_fire_once(self, store: Store) -> None:
        """Routines down for 10 minutes, claimed by 16 racing ticks: each routine's 9
        collapsed fires are counted once (the count rides in its locked cursor move)."""
        from alma_schedule.engine.decide import decide
        from alma_schedule.settings import Settings

        n = self.scaled(200)
        for rid in _ids(n):
            register(store, rid, schedule={"every": 60}, last_fire=T0 - 10 * MINUTE, next_due_at=T0 - 9 * MINUTE)
        settings = Settings()

        def claimer(_: int) -> list[ClaimBatch]:
            mine: list[ClaimBatch] = []
            while True:
                batch = store.claim_due(T0, 20, lambda r: decide(r, T0, settings), TIMERS)
                if not batch.claimed:
                    return mine
                mine.append(batch)

        batches = [b for mine in race(16, claimer) for b in mine]
        assert sum(k for b in batches for _, k in b.fires_missed) == 9 * n, "each collapsed fire reported once"
        assert {(r.fires_missed, r.last_fire) for r in store.iter_routines()} == {(9, T0)}, "counted once each"

    def test_claim_due_against_claim_manual_loses_no_fire(self, store: Store) -> None:
        n = self.scaled(200)
        ids = _ids(n)
        for rid in ids:
            register(store, rid)

        def worker(i: int) -> list[tuple[str, ClaimResult]]:
            if i < 2:  # two ticks, until nothing is due: a batch may come back empty while the rows left are
                for _ in range(100 * n):  # locked by a trigger (skipped, not waited for), so ask without a lock
                    batch = store.claim_due(T0, 10, fire_due_long, TIMERS)
                    if not (batch.claimed or batch.skipped) and not store.peek_due(T0, 1):
                        return []
                raise AssertionError("the ticks never ran out of due routines")
            order = ids if i == 2 else ids[::-1]  # two triggers, from both ends
            return [
                (
                    rid,
                    store.claim_manual(
                        RunKey.of(SCOPE, rid, f"manual:{i}"), now=T0, expires_at=T0 + HOUR, resend_at=T0 + HOUR
                    ),
                )
                for rid in order
            ]

        manual = [pair for out in race(4, worker) for pair in out]
        won = Counter(rid for rid, res in manual if res.won)
        assert set(won.values()) <= {1}, "two manual claims won on one routine"
        for _, res in manual:
            assert res.won or res.reason == "overlap", res
        for routine in store.iter_routines():
            rid = routine.routine_id
            runs = store.list_runs(SCOPE, routine_id=rid)
            assert routine.last_fire == T0, "every due cursor advanced"
            schedule = [r for r in runs if r.origin == "schedule"]
            assert [r.run_id for r in schedule] == [fire_id(T0)], "a run row for every advanced cursor"
            assert len(_non_terminal(runs)) == 1, runs
            if won[rid]:
                assert (schedule[0].state, schedule[0].reason) == ("skipped", "overlap")
            else:
                assert schedule[0].state == "claimed"

    def test_supersession_against_start_has_one_winner(self, store: Store) -> None:
        n = self.scaled(200)
        for rid in _ids(n):
            register(store, rid)
        first = _claim_all(store)
        assert len(first) == n

        def worker(i: int) -> list[ClaimResult]:
            if i == 0:
                return [store.start(rec.key, now=T0 + MINUTE) for rec in first]
            while True:
                batch = store.claim_due(T0 + MINUTE, 10, fire_due_long, TIMERS)
                if not (batch.claimed or batch.skipped):
                    return []

        starts = race(2, worker)[0]
        for rec, res in zip(first, starts, strict=True):
            runs = {r.run_id: r for r in store.list_runs(SCOPE, routine_id=rec.routine_id)}
            old, new = runs[fire_id(T0)], runs[fire_id(T0 + MINUTE)]
            if res.won:
                assert old.state == "running" and (new.state, new.reason) == ("skipped", "overlap")
            else:
                assert res.reason == "superseded", res
                assert (old.state, old.reason, new.state) == ("skipped", "missed", "claimed")

    def test_4_workers_start_exactly_max_runs(self, store: Store) -> None:
        """Four callers claim the same minutes and race to start every claimed fire, on odd minutes
        only (an even minute's claim is superseded, never started: it gives its slot back); then one
        caller drains. Each limited routine starts exactly ``max_runs`` fires, each once."""
        n, limit, minutes = self.scaled(100), 3, 8
        for rid in _ids(n):
            register(store, rid, schedule={"every": 60, "max_runs": limit})
        decide = max_runs_decide(limit)

        def claim_at(at: Any) -> None:
            while True:
                batch = store.claim_due(at, 25, decide, TIMERS)
                if len(batch.claimed) + len(batch.skipped) + len(batch.deferred) < 25:
                    return

        def start_all(at: Any) -> list[RunKey]:
            won: list[RunKey] = []
            for rec in store.list_runs(SCOPE, state="claimed", limit=10 * n):
                if store.start(rec.key, now=at, owner="w").won:
                    won.append(rec.key)
                    assert store.finish(rec.key, RunResult.completed("ok"), now=at, timers=TIMERS).won
            return won

        def worker(i: int) -> list[RunKey]:
            mine: list[RunKey] = []
            for m in range(minutes):  # each caller walks the same minutes; they race on every one
                claim_at(T0 + m * MINUTE)
                if m % 2:
                    mine += start_all(T0 + m * MINUTE)
            return mine

        started = Counter(k for mine in race(4, worker) for k in mine)
        for m in range(minutes, minutes + limit + 1):  # one caller: every routine reaches its limit
            claim_at(T0 + m * MINUTE)
            started.update(start_all(T0 + m * MINUTE))
        assert set(started.values()) == {1}, "each fire started once"
        assert Counter(k.routine_id for k in started) == dict.fromkeys(_ids(n), limit), "exactly max_runs starts"
        for routine in store.iter_routines():
            assert (routine.schedule_starts, routine.next_due_at) == (limit, None)
            runs = store.list_runs(SCOPE, routine_id=routine.routine_id, limit=100)
            assert sum(r.started_at is not None for r in runs) == limit, runs

    def test_3_concurrent_take_resends_take_each_row_once(self, store: Store) -> None:
        n = self.scaled(1000)
        for rid in _ids(n):
            register(store, rid)
        claimed = _claim_all(store)
        now = T0 + TIMERS.resend_first

        def taker(_: int) -> list[RunKey]:
            mine: list[RunKey] = []
            while True:
                got = store.take_resends(now, 50, TIMERS).resend
                if not got:
                    return mine
                mine += [r.key for r in got]

        taken = Counter(k for mine in race(3, taker) for k in mine)
        assert set(taken) == {r.key for r in claimed} and set(taken.values()) == {1}
        assert {r.send_attempts for r in store.list_runs(SCOPE, limit=10 * n)} == {1}

    def test_16_threads_start_the_same_runs_once(self, store: Store) -> None:
        n = self.scaled(1000)
        for rid in _ids(n):
            register(store, rid)
        keys = [r.key for r in _claim_all(store)]

        def starter(i: int) -> list[RunKey]:
            order = list(keys)
            random.Random(i).shuffle(order)
            wins = []
            for key in order:
                res = store.start(key, now=T0)
                if res.won:
                    wins.append(key)
                else:
                    assert res.reason == "duplicate" and res.record is not None and res.record.state == "running"
            return wins

        wins = Counter(k for mine in race(16, starter) for k in mine)
        assert len(wins) == n and set(wins.values()) == {1}, "exactly one start per run"

    def test_two_collectors_one_winner(self, store: Store) -> None:
        runs = _running(store, self.scaled(100))
        for rec in runs:
            assert store.submit(rec.key, now=T0, batch_id="b", deadline=T0 + HOUR, next_poll_at=T0 + MINUTE).won

        def collector(i: int) -> list[RunKey]:
            order = runs if i == 0 else runs[::-1]
            return [rec.key for rec in order if store.begin_collecting(rec.key, now=T0 + MINUTE).won]

        wins = Counter(k for mine in race(2, collector) for k in mine)
        assert len(wins) == len(runs) and set(wins.values()) == {1}

    def test_concurrent_finishes_have_one_winner_and_one_streak(self, store: Store) -> None:
        runs = _running(store, self.scaled(100))
        results = [RunResult.completed("delivered"), RunResult.failed("runner_error")]

        def finisher(i: int) -> list[bool]:
            return [store.finish(rec.key, results[i], now=T0 + MINUTE, timers=TIMERS).won for rec in runs]

        a, b = race(2, finisher)
        assert all(x != y for x, y in zip(a, b, strict=True)), "exactly one finish per run"
        for rec, completed_won in zip(runs, a, strict=True):
            got = store.get(RunKey.of(SCOPE, rec.routine_id, rec.run_id))
            row = store.get_routine(SCOPE, rec.routine_id)
            assert got is not None and row is not None
            assert got.state == ("completed" if completed_won else "failed")
            assert row.consecutive_failures == (0 if completed_won else 1)

    def test_a_mark_against_a_finish_never_marks_a_finished_run(self, store: Store) -> None:
        """The blocked marker is a CAS on ``running``: racing the owner's finish, either the mark
        came first (and the finish still ends the run, keeping it as history) or it answers False;
        racing marks keep one why, the first."""
        runs = _running(store, self.scaled(100))
        whys = [BlockedWhy.WORKER_LOST, BlockedWhy.TIME_LIMIT]

        def job(i: int) -> list[bool]:
            failed = RunResult.failed("runner_error")
            if i == 0:
                return [store.finish(rec.key, failed, now=T0, timers=TIMERS).won for rec in runs]
            return [store.mark_blocked(rec.key, why=whys[i - 1], now=T0, cost_micros=i) for rec in runs]

        finished, *marked = race(3, job)
        assert all(finished), "the owner's finish always wins its edge"
        for n, rec in enumerate(runs):
            got = store.get(rec.key)
            assert got is not None and got.state == "failed"
            if not (marked[0][n] or marked[1][n]):
                assert got.blocked_why is None
            else:
                assert got.blocked_why in whys and got.blocked_at == T0

    def test_finishes_racing_latest_claims_never_leave_two_open_or_an_orphan_buffer(self, store: Store) -> None:
        """Overlap latest: 4 threads end the active runs (each end releases the buffered fire) while 4
        claim the routines' newer fires (each replaces or buffers, or supersedes a released one).
        Whatever the interleaving, every routine ends with its newest fire as its ONE open run
        (``claimed``) and nothing buffered: never two open, no fire lost, no orphan buffer."""
        from alma_schedule.testing.contract_buffered import LATEST

        runs = _running(store, self.scaled(200))
        assert len(store.claim_due(T0 + MINUTE, 1000, LATEST, TIMERS).buffered) == len(runs)
        newest = T0 + 2 * MINUTE

        def job(i: int) -> None:
            if i < 4:
                for rec in runs[i::4]:
                    store.finish(rec.key, RunResult.completed(), now=newest, timers=TIMERS)
                return
            while store.claim_due(newest, 25, LATEST, TIMERS) != ClaimBatch():
                pass

        race(8, job)
        while store.claim_due(newest, 1000, LATEST, TIMERS) != ClaimBatch():
            pass  # what the racing claimers skipped while locked
        for rec in runs:
            rows = store.list_runs(SCOPE, routine_id=rec.routine_id, limit=100)
            open_ = [(r.run_id, r.state) for r in rows if r.state in NON_TERMINAL or r.state == "buffered"]
            # every active run ended, so nothing waits: the newest fire is the one open run, claimed
            assert open_ == [(fire_id(newest), "claimed")], (rec.routine_id, rows)

    def test_20_routines_race_the_org_ceiling(self, store: Store) -> None:
        runs = _running(store, 20)
        amount, fits = 100, 7
        for day in (DAY, "2026-03-02", "2026-03-03"):
            for rec in runs:
                store.release(rec.key)

            def reserve(i: int, day: str = day) -> tuple[bool, str | None]:
                rec = runs[i]
                ceilings = [Ceiling(f"routine:{rec.routine_id}", 10 * amount), Ceiling(ORG, fits * amount)]
                res = store.reserve(rec.key, day, amount, ceilings)
                return res.ok, res.ceiling

            out = race(20, reserve)
            assert sum(ok for ok, _ in out) == fits, "the ceiling admits exactly what fits"
            assert {c for ok, c in out if not ok} == {ORG}
            assert store.spend(ORG, day) == fits * amount
            held = [store.get(RunKey.of(SCOPE, r.routine_id, r.run_id)) for r in runs]
            assert sum(h.reserved_micros for h in held if h is not None) == fits * amount
