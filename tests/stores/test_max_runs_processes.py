"""``max_runs`` is exact under racing processes: 4 PROCESSES (spawned: no shared Python state) run the
engine's tick over the same minutes on one store, PostgreSQL and SQLite, and race to start every
claimed fire on odd minutes (an even minute's claim is superseded, never started: it gives its slot
back); one process then drains. Each limited routine STARTS exactly ``max_runs`` schedule fires, each
once, ``schedule_starts`` says so, and its index is cleared by the start that reaches it (issue 45,
item 13: ``max_runs`` counts starts, not claims)."""

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
from alma_schedule.settings import Settings, Timers
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


def _start_claimed(store: SqlStore, at: datetime) -> list[tuple[str, str]]:
    """Start (then finish) every ``claimed`` fire of the scope: the processes race on each start."""
    won: list[tuple[str, str]] = []
    for rec in store.list_runs(SCOPE, state="claimed", limit=10 * ROUTINES):
        if store.start(rec.key, now=at, owner="worker").won:
            won.append((rec.routine_id, rec.run_id))
            assert store.finish(rec.key, RunResult.completed("ok"), now=at, timers=Timers.from_settings(Settings())).won
    return won


def _minute(schedule: Any, clock: SettableTime, store: SqlStore, m: int, *, start: bool) -> list[tuple[str, str]]:
    clock.set(T0 + timedelta(minutes=m))
    report = schedule.tick()
    assert not report.errors, report.errors
    return _start_claimed(store, clock()) if start else []


def _ticker(url: str, barrier: Any, out: Any) -> None:
    """A child process: tick every minute of the range (racing the others on each), start the claimed
    fires on odd minutes (racing again), report the starts it won."""
    try:
        clock = SettableTime(T0)
        store = SqlStore(url)
        try:
            keep = Keep()
            schedule = create_schedule(store=store, runner=Noop(), dispatcher=keep, settings=_settings(clock))
            store.list_routines(SCOPE, limit=1)  # connected before the race starts
            barrier.wait(timeout=120)
            started: list[tuple[str, str]] = []
            for m in range(MINUTES):
                started += _minute(schedule, clock, store, m, start=m % 2 == 1)
            out.put(("ok", started))
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
    started = Counter(_race(url))
    store = SqlStore(url)
    try:  # the drain: one process, until every limited routine has started max_runs fires
        clock = SettableTime(T0)
        schedule = create_schedule(store=store, runner=Noop(), dispatcher=Keep(), settings=_settings(clock))
        for m in range(MINUTES, MINUTES + LIMIT + 1):
            started.update(_minute(schedule, clock, store, m, start=True))
        assert set(started.values()) == {1}, "each fire started once"
        per_routine = Counter(rid for rid, _ in started)
        for routine in store.iter_routines():
            runs = store.list_runs(SCOPE, routine_id=routine.routine_id, limit=100)
            ran = [r for r in runs if r.started_at is not None]
            if int(routine.routine_id[1:]) % 2 == 0:
                assert per_routine[routine.routine_id] == LIMIT == len(ran), "exactly max_runs starts"
                assert (routine.schedule_starts, routine.next_due_at) == (LIMIT, None)
                assert not [r for r in runs if r.state == "claimed"], "nothing left to start"
            else:
                assert per_routine[routine.routine_id] == len(ran) >= MINUTES // 2, "unlimited: never stopped"
                assert routine.schedule_starts == 0 and routine.next_due_at is not None
    finally:
        store.close()


@pytest.mark.postgres
def test_4_processes_start_exactly_max_runs_on_postgres(pg_url: str) -> None:
    _check(pg_url)


@pytest.mark.integration  # subprocesses
def test_4_processes_start_exactly_max_runs_on_sqlite(tmp_path: Path) -> None:
    _check(f"sqlite:///{tmp_path}/alma.sqlite3")
