"""``max_runs`` is exact under racing ticks: 4 PROCESSES (spawned: no shared Python state) run the
engine's tick over the same minutes on one store, PostgreSQL and SQLite; each limited routine gets
exactly ``max_runs`` claimed schedule fires, and its index is cleared by the claim that reaches it."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from alma_schedule.engine import create_schedule
from alma_schedule.model import Routine, RoutineSpec, RunHandle, RunRecord, RunResult, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Settings
from alma_schedule.stores.sql import SqlStore, migrate_store

PROCESSES = 4
ROUTINES = 40
LIMIT = 3
MINUTES = 8
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
SCOPE = Scope("org-a", "user-1")


class Noop:
    def validate(self, routine: Routine) -> None:
        return None

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:  # pragma: no cover - never sent
        return RunResult.completed("ok")


class Keep:
    """A dispatcher that keeps what the tick sends (nothing runs: the fires stay claimed)."""

    def __init__(self) -> None:
        self.runs: list[RunRecord] = []

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        self.runs.extend(runs)

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        return None

    def run_queue_depth(self) -> int | None:
        return 0


def _settings(clock: SettableTime) -> Settings:
    return Settings(clock=clock, claim_limit=7)  # small batches: many transactions race


def _ticker(url: str, barrier: Any, out: Any) -> None:
    """A child process: tick every minute of the range (racing the others on each), report claims."""
    try:
        clock = SettableTime(T0)
        store = SqlStore(url)
        try:
            keep = Keep()
            schedule = create_schedule(store=store, runner=Noop(), dispatcher=keep, settings=_settings(clock))
            store.list_routines(SCOPE, limit=1)  # connected before the race starts
            barrier.wait(timeout=120)
            claimed: list[tuple[str, str]] = []
            for m in range(MINUTES):
                clock.set(T0 + timedelta(minutes=m))
                report = schedule.tick()
                assert not report.errors, report.errors
                claimed += [(k.routine_id, k.run_id) for k in report.claimed]
            out.put(("ok", claimed))
        finally:
            store.close()
    except BaseException as exc:
        out.put(("error", repr(exc)))


def _race(url: str) -> list[tuple[str, str]]:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_ticker, args=(url, barrier, out)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():  # pragma: no cover - only if a child hangs
                p.kill()
    errors = [r for r in results if r[0] != "ok"]
    assert not errors, errors
    return [pair for _, mine in results for pair in mine]


def _check(url: str) -> None:
    migrate_store(url)
    store = SqlStore(url)
    try:
        schedule = create_schedule(store=store, runner=Noop(), dispatcher=Keep(), settings=_settings(SettableTime(T0)))
        for i in range(ROUTINES):
            spec = {"every": "1m", "max_runs": LIMIT} if i % 2 == 0 else {"every": "1m"}
            routine = RoutineSpec(SCOPE.org, SCOPE.uid, f"r{i:03d}", "noop", spec)
            schedule.register(routine, now=T0 - timedelta(minutes=1))
    finally:
        store.close()
    claimed = Counter(_race(url))
    assert set(claimed.values()) == {1}, "each fire claimed once"
    per_routine = Counter(rid for rid, _ in claimed)
    store = SqlStore(url)
    try:
        for routine in store.iter_routines():
            runs = store.list_runs(SCOPE, routine_id=routine.routine_id, limit=100)
            taken = [r for r in runs if r.reason != "overlap"]
            if int(routine.routine_id[1:]) % 2 == 0:
                assert per_routine[routine.routine_id] == LIMIT, "exactly max_runs claimed rows"
                assert len(taken) == LIMIT, runs
                assert (routine.schedule_claims, routine.next_due_at) == (LIMIT, None)
            else:
                assert per_routine[routine.routine_id] == MINUTES, "an unlimited routine fires every minute"
                assert routine.schedule_claims == 0
    finally:
        store.close()


@pytest.mark.postgres
def test_4_processes_claim_exactly_max_runs_on_postgres(pg_url: str) -> None:
    _check(pg_url)


@pytest.mark.integration  # subprocesses
def test_4_processes_claim_exactly_max_runs_on_sqlite(tmp_path: Path) -> None:
    _check(f"sqlite:///{tmp_path}/alma.sqlite3")
