"""The tick's live claims past a full first batch (engine/claims.py): concurrent batches on a store
that claims concurrently (PostgreSQL), one after another elsewhere; every fire once, each sent after
its own batch's commit, the bounds and the failures as in the sequential loop."""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from engine_support import SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.engine.claims import claim_live
from alma_schedule.engine.decide import planner
from alma_schedule.errors import ConfigurationError, StoreUnavailable
from alma_schedule.model import RunRecord, RunState
from alma_schedule.settings import load_settings

N = 40


class ThreadRecordingDispatcher(RecordingDispatcher):
    """Also records which thread sent each run, and that its row was committed ``claimed`` by then
    (read on the store's own other connection: a fire is never sent before its batch commits)."""

    def __init__(self, store: Any) -> None:
        super().__init__()
        self.store = store
        self.senders: list[str] = []
        self.uncommitted: list[str] = []

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        for r in runs:
            got = self.store.get(r.key)
            if got is None or got.state != RunState.CLAIMED:
                self.uncommitted.append(str(r.key))
        self.senders.extend(threading.current_thread().name for _ in runs)
        super().send_runs(runs)


def _fleet(make: Any, store: Any, clock: Any, **settings: Any) -> tuple[Any, ThreadRecordingDispatcher]:
    disp = ThreadRecordingDispatcher(store)
    sched = make(dispatcher=disp, claim_limit=3, **settings)
    for i in range(N):
        sched.register(spec(f"r{i:02d}", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    return sched, disp


@every_store
def test_one_tick_claims_every_due_fire_once_in_batches_sent_after_their_commits(make, clock, store) -> None:
    sched, disp = _fleet(make, store, clock)
    report = sched.tick()
    assert len(report.claimed) == N and len(set(report.claimed)) == N
    assert Counter(str(r.key) for r in disp.runs) == Counter(str(k) for k in report.claimed)
    assert disp.uncommitted == []
    rows = sched.runs(SCOPE, limit=1000)
    assert len(rows) == N and {r.routine_id for r in rows} == {f"r{i:02d}" for i in range(N)}
    threaded = {name for name in disp.senders if name.startswith("alma-claim-")}
    if store.claim_concurrency > 1:  # PostgreSQL: the batches after the first ran on the claim threads
        assert threaded and disp.senders[:3] == ["MainThread"] * 3
    else:  # SQLite, memory: one writer, one batch after another, in the tick's own thread
        assert threaded == set()
    assert sched.tick().claimed == ()


@pytest.mark.postgres
@pytest.mark.parametrize("store", ["pg"], indirect=True)
def test_two_batches_hold_their_transactions_at_once(make, clock, store) -> None:
    """Each claim thread's first batch waits, inside ``claim_due``'s transaction (in ``decide``),
    for the other's: they can only both arrive if two batches are open at once; their routines
    are disjoint (SKIP LOCKED), so neither blocks the other."""
    sched, _ = _fleet(make, store, clock)
    meet = threading.Barrier(2, timeout=20)
    met: set[str] = set()
    inner = store.claim_due

    def claim_due(now: Any, limit: int, decide: Any, timers: Any, scan: Any = None) -> Any:
        name = threading.current_thread().name

        def deciding(routine: Any) -> Any:
            if name.startswith("alma-claim-") and name not in met:
                met.add(name)
                meet.wait()  # BrokenBarrierError (the tick raises) unless the other batch is open too
            return decide(routine)

        return inner(now, limit, deciding, timers, scan)

    store.claim_due = claim_due
    report = sched.tick()
    assert len(met) == 2 and len(report.claimed) == N
    assert len(sched.runs(SCOPE, limit=1000)) == N


@every_store
def test_the_batch_bound_and_one_worker_are_the_sequential_loop(make, clock, store) -> None:
    sched, _ = _fleet(make, store, clock, tick_max_batches=4)
    assert len(sched.tick().claimed) == 12  # four batches of three, then the bound, on every backend
    sched2, disp2 = _fleet(make, store, clock, tick_claim_workers=1)
    assert len(sched2.tick().claimed) == N - 12
    assert set(disp2.senders) == {"MainThread"}


@every_store
def test_a_store_failure_in_a_batch_is_raised_by_the_tick(make, clock, store) -> None:
    sched, disp = _fleet(make, store, clock)
    inner, calls = store.claim_due, []

    def claim_due(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise StoreUnavailable("store down (test)")
        return inner(*a, **kw)

    store.claim_due = claim_due
    with pytest.raises(StoreUnavailable, match="store down"):
        sched.tick()
    store.claim_due = inner
    committed = {str(r.key) for r in sched.runs(SCOPE, limit=1000)}
    assert {str(r.key) for r in disp.runs} <= committed  # what was sent had committed
    assert len(sched.tick().claimed) == N - len(committed)  # the next tick claims the rest, once


def test_tick_claim_workers_below_one_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="ALMA_TICK_CLAIM_WORKERS must be at least 1"):
        load_settings(environ={"ALMA_TICK_CLAIM_WORKERS": "0"})


def _counting(store: Any) -> list[int]:
    """Wrap ``store.claim_due`` (the real one runs): the size of each batch it returned."""
    inner, sizes = store.claim_due, []

    def claim_due(*a: Any, **kw: Any) -> Any:
        batch = inner(*a, **kw)
        sizes.append(len(batch.claimed) + len(batch.skipped) + len(batch.deferred) + len(batch.buffered))
        return batch

    store.claim_due = claim_due
    return sizes


@every_store
def test_exactly_claim_limit_due_is_one_batch_on_postgresql(make, clock, store) -> None:
    """A full first batch whose INSERT saw nothing else due ends the claims (``ClaimScan.exhaust``,
    PostgreSQL): no further batch is started only to come back empty. Elsewhere, as before: the
    empty batch that tells. The same claims on every backend."""
    disp = ThreadRecordingDispatcher(store)
    sched = make(dispatcher=disp, claim_limit=3)
    for i in range(3):
        sched.register(spec(f"r{i}", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    sizes = _counting(store)
    report = sched.tick()
    assert len(report.claimed) == 3 and len(disp.runs) == 3
    if store.claim_concurrency > 1:
        assert sizes == [3]
    else:
        assert sizes == [3, 0]


@pytest.mark.postgres
@pytest.mark.parametrize("store", ["pg"], indirect=True)
def test_a_full_first_batch_with_more_due_goes_on(make, clock, store) -> None:
    """One more due routine than ``claim_limit``: the first batch's check sees it, the tick goes on
    and claims it (the scan is not exhausted)."""
    sched = make(dispatcher=ThreadRecordingDispatcher(store), claim_limit=3)
    for i in range(4):
        sched.register(spec(f"r{i}", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    sizes = _counting(store)
    assert len(sched.tick().claimed) == 4
    assert sizes[0] == 3 and sum(sizes) == 4


@every_store
def test_the_claims_keep_each_batchs_keys_and_lags_never_its_run_records(make, clock, store) -> None:
    """What the tick keeps of a batch once its claims are sent is a ``Tally`` (the report's keys, the
    tick log's lags): a tick over a million routines holds no batch's run records until it returns."""
    sched, disp = _fleet(make, store, clock)
    rt = sched._rt
    at = rt.now(None)
    live = claim_live(rt, at, planner(rt, at))
    sent = {r.key: r for r in disp.runs}
    assert len(live.batches) >= N // 3 and len(sent) == N
    assert sorted(str(k) for b in live.batches for k in b.claimed) == sorted(str(k) for k in sent)
    for batch in live.batches:
        assert batch.lags == tuple((at - sent[k].fire_at).total_seconds() for k in batch.claimed)
        assert batch.short == (len(batch.claimed) < 3) and batch.skipped == batch.buffered == ()
        parts = gc.get_referents(batch)
        held = [x for part in parts for x in (gc.get_referents(part) if isinstance(part, tuple) else [part])]
        assert held and not any(isinstance(x, RunRecord) for x in held)
