"""The races of the contract again, from 4 PROCESSES (spawned: no shared Python state, each with
its own small pool) on one PostgreSQL database: the database alone keeps the guarantees. The last
one races whole engine ticks over backfills."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from alma_schedule.engine import create_schedule
from alma_schedule.model import Ceiling, RoutineSpec, RunKey, RunResult
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Settings
from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing.builders import DAY, MINUTE, SCOPE, T0, TIMERS, fire_due_long, register
from tests.stores.sql_support import empty_pg, opened, pg_database

pytestmark = pytest.mark.postgres

PROCESSES = 4
ROUTINES = 300
ORG_CEILING = "org:org-a"


# ------------------------------------------------------------------------------ the crew


def _member(url: str, index: int, inbox: Any, barrier: Any, out: Any) -> None:
    """A child process: for each job name received, wait for the others, run it, report."""
    store = SqlStore(url)
    try:
        while (name := inbox.get(timeout=300)) is not None:
            try:
                store.list_routines(SCOPE, limit=1)  # connected before the race starts
                barrier.wait(timeout=120)
                out.put((index, "ok", JOBS[name](store, index)))
            except BaseException as exc:
                out.put((index, "error", repr(exc)))
    finally:
        store.close()


class Crew:
    """4 spawned processes on one database, reused by every race of this module."""

    def __init__(self, url: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.url = url
        self.barrier, self.out = ctx.Barrier(PROCESSES), ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in range(PROCESSES)]
        self.procs = [
            ctx.Process(target=_member, args=(url, i, self.inboxes[i], self.barrier, self.out))
            for i in range(PROCESSES)
        ]
        for p in self.procs:
            p.start()

    def race(self, name: str) -> list[Any]:
        for inbox in self.inboxes:
            inbox.put(name)
        results = sorted(self.out.get(timeout=240) for _ in self.procs)
        errors = [r for r in results if r[1] != "ok"]
        assert not errors, errors
        return [r[2] for r in results]

    def stop(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for p in self.procs:
            p.join(timeout=60)
            if p.is_alive():  # pragma: no cover - only if a child hangs
                p.kill()


@pytest.fixture(scope="module")
def crew() -> Iterator[Crew]:
    with pg_database() as url:
        team = Crew(url)
        try:
            yield team
        finally:
            team.stop()


@pytest.fixture
def pg_url(crew: Crew) -> str:
    empty_pg(crew.url)
    return crew.url


def _claimer(store: SqlStore, index: int) -> list[tuple[str, str]]:
    mine: list[tuple[str, str]] = []
    while True:
        batch = store.claim_due(T0, 25, fire_due_long, TIMERS)
        assert batch.skipped == () and batch.deferred == ()
        if not batch.claimed:
            return mine
        mine += [(r.routine_id, r.run_id) for r in batch.claimed]


def _starter(store: SqlStore, index: int) -> list[str]:
    keys = [RunKey(r.org, r.uid, r.routine_id, r.run_id) for r in store.list_runs(SCOPE, limit=10_000)]
    keys = keys[index::PROCESSES] + keys  # each process starts its share first, then everything
    wins = []
    for key in keys:
        res = store.start(key, now=T0)
        if res.won:
            wins.append(key.routine_id)
        else:
            assert res.reason == "duplicate" and res.record is not None and res.record.state == "running", res
    return wins


def _reserver(store: SqlStore, index: int) -> list[tuple[bool, str | None]]:
    out = []
    for run in store.list_runs(SCOPE, state="running", limit=1000)[index::PROCESSES]:
        ceilings = [Ceiling(f"routine:{run.routine_id}", 1000), Ceiling(ORG_CEILING, 7 * 100)]
        res = store.reserve(run.key, DAY, 100, ceilings)
        out.append((res.ok, res.ceiling))
    return out


# -- backfill: 4 processes ticking the engine (runs executed in-process, right after each commit)
BACKFILLED = 12
EVERY_10 = {"cron": "*/10 * * * *"}
TICK_AT = T0 + (BACKFILLED + 2) * 10 * MINUTE + MINUTE  # after the last live fire, before the next


class _CountingRunner:
    """Records every run it executes (the test's own side effect, per process)."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

    def validate(self, routine: Any) -> None:
        return None

    def run(self, routine: Any, handle: Any) -> RunResult:
        self.ran.append((handle.key.routine_id, handle.key.run_id))
        return RunResult.completed("ok")


def _ticker(store: SqlStore, index: int) -> list[tuple[str, str]]:
    runner = _CountingRunner()
    sched = create_schedule(store=store, runner=runner, settings=Settings(clock=SettableTime(TICK_AT)))
    for _ in range(500):
        sched.tick()
        rows = [store.get_backfill(SCOPE, r.routine_id) for r in store.list_routines(SCOPE)]
        if not any(b is not None and b.pending for b in rows) and not store.list_runs(SCOPE, state="claimed", limit=1):
            break
    return runner.ran


JOBS: dict[str, Callable[[SqlStore, int], Any]] = {
    "claim": _claimer,
    "start": _starter,
    "reserve": _reserver,
    "tick": _ticker,
}


# ------------------------------------------------------------------------------ races


def test_4_processes_claim_each_fire_once(crew: Crew, pg_url: str) -> None:
    with opened(pg_url) as store:
        for i in range(ROUTINES):
            register(store, f"r{i:04d}")
    claimed = Counter(key for mine in crew.race("claim") for key in mine)
    assert len(claimed) == ROUTINES and set(claimed.values()) == {1}, "each fire claimed exactly once"
    with opened(pg_url) as store:
        routines = list(store.iter_routines())
        assert all(r.last_fire == T0 and r.next_due_at == T0 + MINUTE for r in routines)
        runs = store.list_runs(SCOPE, limit=10_000)
        assert len(runs) == ROUTINES and {r.state for r in runs} == {"claimed"}


def test_4_processes_start_each_run_once(crew: Crew, pg_url: str) -> None:
    with opened(pg_url) as store:
        for i in range(ROUTINES // 3):
            register(store, f"r{i:04d}")
        assert len(store.claim_due(T0, 1000, fire_due_long, TIMERS).claimed) == ROUTINES // 3
    wins = Counter(rid for mine in crew.race("start") for rid in mine)
    assert len(wins) == ROUTINES // 3 and set(wins.values()) == {1}, "exactly one start per run"


def test_4_processes_never_exceed_the_org_ceiling(crew: Crew, pg_url: str) -> None:
    with opened(pg_url) as store:
        for i in range(20):
            register(store, f"r{i:04d}")
        for rec in store.claim_due(T0, 1000, fire_due_long, TIMERS).claimed:
            assert store.start(rec.key, now=T0).won
    outcomes = [o for mine in crew.race("reserve") for o in mine]
    assert len(outcomes) == 20
    assert sum(ok for ok, _ in outcomes) == 7, "the ceiling admits exactly what fits"
    assert {c for ok, c in outcomes if not ok} == {ORG_CEILING}
    with opened(pg_url) as store:
        assert store.spend(ORG_CEILING, DAY) == 700
        held = store.list_runs(SCOPE, state="running", limit=100)
        assert sum(r.reserved_micros for r in held) == 700


def test_four_processes_backfilling_run_every_fire_once(crew: Crew, pg_url: str) -> None:
    """Racing ticks over 10 routines' backfills: every fire of each range runs exactly once."""
    runner = _CountingRunner()
    with opened(pg_url) as store:
        clock = SettableTime(T0)
        sched = create_schedule(store=store, runner=runner, settings=Settings(clock=clock))
        for i in range(10):
            sched.register(RoutineSpec(SCOPE.org, SCOPE.uid, f"b{i:02d}", "test", EVERY_10))
        for minutes in (10, (BACKFILLED + 2) * 10):  # a long downtime: the fires between have no row
            clock.set(T0 + minutes * MINUTE)
            sched.tick()
        clock.set(TICK_AT)
        for i in range(10):
            receipt = sched.backfill(SCOPE, f"b{i:02d}", T0 + 10 * MINUTE, T0 + (BACKFILLED + 2) * 10 * MINUTE)
            assert (receipt.fires, receipt.already_run) == (BACKFILLED, 2)
    ran = Counter(key for mine in crew.race("tick") for key in mine)
    expected = {
        (f"b{i:02d}", (T0 + m * 10 * MINUTE).strftime("%Y-%m-%dT%H:%M:%SZ"))
        for i in range(10)
        for m in range(2, BACKFILLED + 2)
    }
    assert set(ran) == expected and set(ran.values()) == {1}, "every backfilled fire ran exactly once"
    with opened(pg_url) as store:
        rows = [r for r in store.list_runs(SCOPE, limit=10_000) if r.origin == "backfill"]
        assert len(rows) == 10 * BACKFILLED and {(r.state, r.reason) for r in rows} == {("completed", "ok")}
        assert all(not store.get_backfill(SCOPE, f"b{i:02d}").pending for i in range(10))  # type: ignore[union-attr]
