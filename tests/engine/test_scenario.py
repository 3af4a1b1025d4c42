"""The scenario: 50 routines of every kind over a simulated week across a DST change.

Two tickers (threads) tick at every step: every minute on the DST day (New York and Chicago spring
forward on 2026-03-08), every 15 minutes on the other days. The dispatcher loses 10% of messages,
duplicates 10% and delays 5% past the run's window (seeded). Levers are pulled mid-week; one
routine fails until its streak latches a pause; job routines submit and are collected.

The expected ledger is computed independently of the engine: a tiny model walks the same tick
instants with the core's ``latest_fire`` (the core is checked against a brute-force oracle in
tests/core) and the dispatcher's own delivery log says which message reached a worker when. From
those two, every row's existence, claim instant and outcome is predicted, and the ledger must match
exactly: each fire run once or skipped with its reason; lost messages re-sent and run once; nothing
replayed; nothing run late; never two runs of a routine at once.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from engine_support import MINUTE, ScriptRunner

from alma_schedule.core import fire_id, latest_fire, parse_schedule
from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.model import RoutineSpec, RunKey, RunRecord, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store

START = datetime(2026, 3, 5, 0, 0, tzinfo=UTC)
END = START + timedelta(days=7)
DENSE = (datetime(2026, 3, 7, 18, 0, tzinfo=UTC), datetime(2026, 3, 8, 14, 0, tzinfo=UTC))
SCOPE = Scope("acme", "ops")
SEED = 20260308
THRESHOLD = Settings().failure_threshold

CRONS = [
    ("0 * * * *", None),
    ("0 * * * *", "America/New_York"),  # wildcard hour: the 02:00 hour of the 8th never fires
    ("30 2 * * *", "America/New_York"),  # fixed time in the gap: fires once, at 03:00 EDT
    ("0 2 * * *", "America/New_York"),
    ("*/30 1-3 * * *", "America/New_York"),
    ("59 1 * * *", "America/New_York"),
    ("0 3 8 3 *", "America/New_York"),
    ("*/20 * * * *", "America/Chicago"),
    ("15 8 * * 1-5", "Europe/Lisbon"),
    ("0 9 * * *", "Asia/Kolkata"),
    ("45 23 * * *", "America/Los_Angeles"),
    ("0 0 * * 0", None),
    ("5 4 * * *", "Australia/Lord_Howe"),
    ("0 12 * * 6", "America/Sao_Paulo"),
    ("*/5 * * * *", None),
    ("10,40 * * * *", "America/Denver"),
    ("7 */3 * * *", "Europe/London"),
    ("30 6 * * 1-5", "Pacific/Chatham"),
    ("0 7 * * *", "America/New_York"),
    ("*/45 * * * *", "UTC"),
    ("0 2 * * *", "America/Chicago"),
    ("*/10 2-3 * * 0", "America/New_York"),
]
EVERYS = ["45s", "5m", "7m", "13m", "17m", "37m", "1h", "90m", "2h", "3h", "6h", "1d", "23h"]
ATS = [
    START + timedelta(hours=3, minutes=17),
    datetime(2026, 3, 8, 6, 59, tzinfo=UTC),
    datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
    datetime(2026, 3, 8, 7, 30, 30, tzinfo=UTC),
    datetime(2026, 3, 9, 12, 0, tzinfo=UTC),
    datetime(2026, 3, 11, 23, 59, 59, tzinfo=UTC),
    END + timedelta(hours=1),  # never fires within the week
    datetime(2026, 3, 6, 0, 1, tzinfo=UTC),
]
JOBS = [
    {"cron": "*/10 * * * *"},
    {"cron": "0 * * * *", "tz": "America/New_York"},
    {"every": "25m"},
    {"every": "2h"},
]
FAILING = {"cron": "0 */2 * * *"}
PAUSED = {"cron": "*/15 * * * *"}  # paused 6 March 10:00 -> resumed 7 March 09:00
DISABLED = {"every": "30m"}  # disabled 8 March 06:30 (DST day) -> enabled 8 March 07:45
LEVERS = {
    "paused": (datetime(2026, 3, 6, 10, 0, tzinfo=UTC), datetime(2026, 3, 7, 9, 0, tzinfo=UTC)),
    "disabled": (datetime(2026, 3, 8, 6, 30, tzinfo=UTC), datetime(2026, 3, 8, 7, 45, tzinfo=UTC)),
}


def routines(start: datetime = START) -> list[RoutineSpec]:
    out = [
        RoutineSpec(SCOPE.org, SCOPE.uid, f"cron-{i:02d}", "script", {"cron": c, "tz": z}, {})
        for i, (c, z) in enumerate(CRONS)
    ]
    out += [RoutineSpec(SCOPE.org, SCOPE.uid, f"every-{e}", "script", {"every": e}, {}) for e in EVERYS]
    out += [
        RoutineSpec(SCOPE.org, SCOPE.uid, f"at-{i}", "script", {"at": a.isoformat()}, {})
        for i, a in enumerate(ATS)
        if a >= start
    ]
    out += [
        RoutineSpec(
            SCOPE.org,
            SCOPE.uid,
            f"job-{i}",
            "script",
            s,
            {"behave": "submit", "polls": 2, "deadline_s": 10800},
        )
        for i, s in enumerate(JOBS)
    ]
    out.append(RoutineSpec(SCOPE.org, SCOPE.uid, "failing", "script", FAILING, {"behave": "fail"}))
    out.append(RoutineSpec(SCOPE.org, SCOPE.uid, "paused", "script", PAUSED, {}))
    out.append(RoutineSpec(SCOPE.org, SCOPE.uid, "disabled", "script", DISABLED, {}))
    return out


def steps(start: datetime = START, end: datetime = END, sparse: timedelta = 15 * MINUTE) -> Iterator[datetime]:
    """Every minute inside DENSE (the DST day), every ``sparse`` outside it."""
    t = start
    while t < end:
        yield t
        t += MINUTE if DENSE[0] <= t < DENSE[1] else sparse


@dataclass
class ChaosDispatcher:
    """Drops 10%, duplicates 10%, delays 5% past the run's window; logs every delivery."""

    clock: SettableTime
    seed: int
    schedule: Scheduler | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    sends: dict[tuple[str, RunKey], int] = field(default_factory=lambda: defaultdict(int))
    held: list[tuple[datetime, str, RunKey]] = field(default_factory=list)
    deliveries: dict[RunKey, list[datetime]] = field(default_factory=lambda: defaultdict(list))
    fates: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    first_dropped: set[RunKey] = field(default_factory=set)

    def _roll(self, kind: str, key: RunKey) -> float:
        with self.lock:
            self.sends[(kind, key)] += 1
            n = self.sends[(kind, key)]
        return random.Random(f"{self.seed}/{kind}/{key}/{n}").random()

    def _deliver(self, kind: str, key: RunKey) -> None:
        assert self.schedule is not None
        if kind == "run":
            with self.lock:
                self.deliveries[key].append(self.clock())
            self.schedule.execute(key)
        else:
            self.schedule.collect(key)

    def _send(self, kind: str, records: Sequence[RunRecord]) -> None:
        for rec in records:
            x = self._roll(kind, rec.key)
            if x < 0.10:
                with self.lock:
                    self.fates["dropped"] += 1
                    if kind == "run" and self.sends[(kind, rec.key)] == 1:
                        self.first_dropped.add(rec.key)
                continue
            if x < 0.20:
                self.fates["duplicated"] += 1
                self._deliver(kind, rec.key)
                self._deliver(kind, rec.key)
            elif x < 0.25:
                late = rec.expires_at + MINUTE if kind == "run" else self.clock() + 20 * MINUTE
                with self.lock:
                    self.fates["delayed"] += 1
                    self.held.append((late, kind, rec.key))
            else:
                self._deliver(kind, rec.key)

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        self._send("run", runs)

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        self._send("collect", runs)

    def run_queue_depth(self) -> int | None:
        return None

    def release(self, now: datetime) -> None:
        with self.lock:
            due = [h for h in self.held if h[0] <= now]
            self.held = [h for h in self.held if h[0] > now]
        for _, kind, key in sorted(due, key=lambda h: (h[0], str(h[2]))):
            self._deliver(kind, key)


def model(spec: RoutineSpec, registered_at: datetime, ticks: Sequence[datetime]) -> dict[datetime, datetime]:
    """fire -> the tick that claims it: the latest fire at each tick, later than the cursor."""
    schedule = parse_schedule(spec.schedule)
    window = LEVERS.get(spec.routine_id)
    cursor: datetime | None = None
    out: dict[datetime, datetime] = {}
    for t in ticks:
        if window is not None and window[0] <= t < window[1]:
            continue
        if window is not None and t == window[1]:
            cursor = t  # resume / enable restart the cursor at now
        f = latest_fire(schedule, registered_at, t)
        if f is not None and (cursor is None or f > cursor):
            out[f] = t
            cursor = f
    return out


def run_week(store: Store, ticks: Sequence[datetime]) -> tuple[Scheduler, ChaosDispatcher, ScriptRunner, list[Any]]:
    clock = SettableTime(ticks[0])
    runner = ScriptRunner()
    chaos = ChaosDispatcher(clock, SEED)
    sched = create_schedule(store=store, runner=runner, dispatcher=chaos, settings=Settings(clock=clock))
    chaos.schedule = sched
    for s in routines(ticks[0]):
        sched.register(s)
    reports: list[Any] = []
    levers = {
        LEVERS["paused"][0]: lambda: sched.pause(SCOPE, "paused", "maintenance"),
        LEVERS["paused"][1]: lambda: sched.resume(SCOPE, "paused"),
        LEVERS["disabled"][0]: lambda: sched.disable(SCOPE, "disabled"),
        LEVERS["disabled"][1]: lambda: sched.enable(SCOPE, "disabled"),
    }
    inside = [t for t in levers if ticks[0] <= t <= ticks[-1]]
    assert set(inside) <= set(ticks), "levers must be pulled on tick instants"
    with ThreadPoolExecutor(max_workers=2) as pool:
        for t in ticks:
            clock.set(t)
            if t in levers:
                levers[t]()
            chaos.release(t)
            reports.extend(f.result() for f in [pool.submit(sched.tick), pool.submit(sched.tick)])
    return sched, chaos, runner, reports


def check_ledger(
    sched: Scheduler, chaos: ChaosDispatcher, runner: ScriptRunner, ticks: Sequence[datetime]
) -> dict[str, int]:
    last_tick = ticks[-1]
    runs_of: dict[RunKey, list[datetime]] = defaultdict(list)
    for key, at in runner.runs:
        runs_of[key].append(at)
    assert all(len(v) == 1 for v in runs_of.values()), "a fire ran twice"
    assert len(set(runner.deliveries)) == len(runner.deliveries), "a job delivered twice"
    tally: dict[str, int] = defaultdict(int)
    for spec in routines(ticks[0]):
        routine = sched.store.get_routine(SCOPE, spec.routine_id)
        assert routine is not None
        rows = {r.run_id: r for r in sched.runs(SCOPE, routine_id=spec.routine_id, limit=100_000)}
        expected = model(spec, routine.registered_at, ticks)
        if spec.routine_id == "failing":
            failed = sorted((r for r in rows.values() if r.state == "failed"), key=lambda r: r.fire_at)
            assert all(r.reason == "provider_error" for r in failed)
            if len(failed) < THRESHOLD:
                assert routine.paused_reason is None
            else:  # the streak latched a pause at the threshold: nothing claimed after it
                assert len(failed) == THRESHOLD
                assert routine.paused_reason == "failure_streak:provider_error"
                latched = failed[-1].finished_at
                assert latched is not None
                expected = {f: t for f, t in expected.items() if t <= latched}
        # nothing replayed, nothing missing: exactly the modelled fires, claimed at the modelled tick
        assert sorted(rows) == sorted(fire_id(f) for f in expected), spec.routine_id
        for fire, claimed_at in expected.items():
            rec = rows[fire_id(fire)]
            assert (rec.fire_at, rec.claimed_at, rec.origin) == (fire, claimed_at, "schedule")
            tally[_check_row(rec, spec, rows, chaos, runs_of, last_tick)] += 1
        _never_in_parallel(list(rows.values()))
    # every run the runner saw is a row of the ledger
    assert all(sched.run(SCOPE, k.routine_id, k.run_id) for k in runs_of)
    return tally


def _inactive_at(routine_id: str, at: datetime) -> str | None:
    window = LEVERS.get(routine_id)
    if window is not None and window[0] <= at < window[1]:
        return "paused" if routine_id == "paused" else "disabled"
    return None


def _check_row(
    rec: RunRecord,
    spec: RoutineSpec,
    rows: dict[str, RunRecord],
    chaos: ChaosDispatcher,
    runs_of: dict[RunKey, list[datetime]],
    last_tick: datetime,
) -> str:
    key = rec.key
    ran = runs_of.get(key, [])
    if rec.reason == "overlap":
        # skipped at insert because another run of the routine was active at that instant
        assert spec.definition.get("behave") == "submit"
        assert not ran and not chaos.deliveries.get(key)
        assert any(
            p.started_at is not None
            and p.started_at <= rec.claimed_at
            and (p.finished_at is None or p.finished_at >= rec.claimed_at)
            for p in rows.values()
            if p.run_id != rec.run_id
        ), f"unjustified overlap {key}"
        return "skipped(overlap)"
    in_time = sorted(d for d in chaos.deliveries.get(key, []) if d < rec.expires_at)
    if not in_time:
        assert not ran, f"{key} ran without a message in its window"
        if rec.expires_at > last_tick:
            assert rec.state == "claimed"  # still eligible when the week ends
            return "claimed"
        assert (rec.state, rec.reason) == ("skipped", "missed"), key
        return "skipped(missed)"
    first = in_time[0]
    inactive = _inactive_at(spec.routine_id, first)
    if inactive is not None:
        assert (rec.state, rec.reason, ran) == ("skipped", inactive, []), key
        return f"skipped({inactive})"
    assert ran == [first], f"{key} must run once, at its first in-time message"
    assert rec.fire_at <= first < rec.expires_at  # nothing early, nothing late
    behave = spec.definition.get("behave", "ok")
    if behave == "fail":
        assert (rec.state, rec.reason) == ("failed", "provider_error"), key
    elif behave == "submit":
        if rec.state in ("submitted", "collecting"):
            assert rec.deadline is not None and rec.deadline > last_tick
            return "submitted"
        assert (rec.state, rec.reason, rec.cost_micros) == ("completed", "delivered", 7), key
    else:
        assert (rec.state, rec.reason) == ("completed", "ok"), key
    return "resent and run" if key in chaos.first_dropped else rec.state


def _never_in_parallel(rows: list[RunRecord]) -> None:
    spans = sorted((r.started_at, r.finished_at or datetime.max.replace(tzinfo=UTC)) for r in rows if r.started_at)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, "two runs of one routine overlapped"


def test_a_week_across_dst_with_two_tickers_and_a_lossy_dispatcher() -> None:
    from alma_schedule.stores.memory import MemoryStore

    ticks = list(steps())
    assert len(routines()) == 50
    sched, chaos, runner, reports = run_week(MemoryStore(), ticks)
    tally = check_ledger(sched, chaos, runner, ticks)
    assert all(r.errors == () for r in reports)
    assert all(r.blocked == () for r in reports)
    # the chaos happened, and the engine absorbed it
    assert min(chaos.fates["dropped"], chaos.fates["duplicated"], chaos.fates["delayed"]) > 100
    assert tally["resent and run"] > 50  # lost first messages, re-sent, run once
    assert tally["skipped(missed)"] > 50
    assert tally["skipped(overlap)"] > 10
    assert tally["completed"] > 1000
    assert sched.get(SCOPE, "failing").paused_reason == "failure_streak:provider_error"


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("pg", marks=pytest.mark.postgres)])
def test_the_dst_morning_on_sql(backend: str, request: pytest.FixtureRequest) -> None:
    """The same scenario on the SQL backends, over the hours around New York's spring-forward gap."""
    from alma_schedule.stores import open_store
    from alma_schedule.stores.sql import migrate_store

    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    migrate_store(url)
    store = open_store(url)
    try:
        morning = datetime(2026, 3, 8, 5, 45, tzinfo=UTC)  # every 5 minutes across the gap (07:00Z)
        ticks = [morning + i * 5 * MINUTE for i in range(30)]
        sched, chaos, runner, reports = run_week(store, ticks)
        tally = check_ledger(sched, chaos, runner, ticks)
        assert all(r.errors == () and r.blocked == () for r in reports)
        assert sum(chaos.fates.values()) > 10
        assert tally["completed"] > 100
        gap = sched.runs(SCOPE, routine_id="cron-02")  # 30 2 * * * New York: once, at 03:00 EDT
        assert [(r.run_id, r.state) for r in gap] == [("2026-03-08T07:00:00Z", "completed")]
    finally:
        store.close()
