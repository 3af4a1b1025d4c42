"""The races of the contract again, from 4 PROCESSES (spawned: no shared Python state, each with
its own small pool) on one PostgreSQL database: the database alone keeps the guarantees."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from alma_schedule.model import Ceiling, RunKey
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


JOBS: dict[str, Callable[[SqlStore, int], Any]] = {
    "claim": _claimer,
    "start": _starter,
    "reserve": _reserver,
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
