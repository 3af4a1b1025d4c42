"""End to end with subprocess workers on the real Redis and PostgreSQL (``slow``; runs in CI).

* 3 clocks (``alma-schedule clock run --every 1s``) ticking concurrently for a minute over 200
  routines (``every`` 2, 3, 5 and 10 s: ~57 fires a second, packed into ``run_many`` messages), a
  tick worker and 2 run workers (prefork, 2 children each): every fire well inside the minute is
  decided and completed, each exactly once (counted by the side effects the test runner writes to
  its own table), and the ledger agrees both ways.
* A worker SIGKILLed between dispatch and ``running``: the fire is re-sent and runs once.
* A worker SIGKILLed mid-run: the run stays ``running``, is never re-run, and shows in the tick
  report's ``blocked`` and in the store's ``stuck``.
* Overlap ``latest``: the fire due during a slow run waits ``buffered`` and runs right after it,
  sent by the worker that ended the run, exactly once, never in parallel.
* A backfill after a long downtime: each missing fire runs once on the run worker, one per tick.

The test kind ``count`` reaches the subprocess workers through the ordinary ``alma_schedule.runners``
entry point group (a dist-info on ``PYTHONPATH``, see ``e2e_runners``); ``E2E_SECONDS`` shortens the
one-minute run for local iterations.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from celery_support import ALMA, Procs, alma_env, make_settings, utcnow, wait_for, wait_worker_ready
from e2e_runners import count_factory, create_effects_table, libpq_url

from alma_schedule.celery import create_app
from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.errors import Overlap
from alma_schedule.model import RoutineSpec, RunKey, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.tasks import CeleryDispatcher

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme", "e2e")
SECONDS = float(os.environ.get("E2E_SECONDS", "20"))


@dataclass
class E2E:
    settings: Settings
    schedule: Scheduler
    procs: Procs
    tmp_path: Path

    def env(self, **extra: str) -> dict[str, str]:
        return alma_env(self.settings, self.tmp_path, **extra)

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(libpq_url(self.settings.database_url)) as conn:
            return conn.execute(query, args).fetchall()

    def effects(self) -> Counter[tuple[str, str, str, str]]:
        rows = self.sql("SELECT org, uid, routine_id, run_id FROM e2e_effects")
        return Counter((r[0], r[1], r[2], r[3]) for r in rows)

    def ledger(self) -> dict[tuple[str, str, str, str], tuple[str, str | None]]:
        rows = self.sql("SELECT org, uid, routine_id, run_id, state, reason FROM alma.runs")
        return {(r[0], r[1], r[2], r[3]): (r[4], r[5]) for r in rows}

    def state(self, key: RunKey) -> str | None:
        rec = self.schedule.store.get(RunKey.of(key.scope, key.routine_id, key.run_id))
        return None if rec is None else rec.state


@pytest.fixture
def e2e(pg_url: str, redis_url: str, tmp_path: Path) -> Iterator[E2E]:
    migrate_store(pg_url)
    create_effects_table(pg_url)
    settings = make_settings(pg_url, redis_url, resend_first=timedelta(seconds=2), resend_max=timedelta(seconds=4))
    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"count": count_factory})
    app = create_app(settings, registry=registry)
    store = open_store(pg_url)
    schedule = create_schedule(
        store=store, runner=registry.resolve, dispatcher=CeleryDispatcher(app, settings), settings=settings
    )
    procs = Procs(tmp_path)
    try:
        yield E2E(settings, schedule, procs, tmp_path)
    finally:
        procs.stop_all()
        store.close()


def due_now(e2e: E2E, routine_id: str, definition: dict[str, Any] | None = None) -> None:
    """A routine whose ``every 1h`` fire is due now (registered an hour and a second ago)."""
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, "count", {"every": "1h"}, definition or {})
    e2e.schedule.register(spec, now=utcnow() - timedelta(hours=1, seconds=1))


# --------------------------------------------------------------------------- many clocks


INTERVALS = (2, 3, 5, 10)  # seconds; 50 routines each


def expected_fires(registered_at: datetime, every: int, start: datetime, end: datetime) -> set[str]:
    out: set[str] = set()
    k = 1
    while True:
        fire = registered_at + timedelta(seconds=every * k)
        if fire > end:
            return out
        if fire >= start:
            out.add(fire.strftime("%Y-%m-%dT%H:%M:%SZ"))
        k += 1


def test_three_clocks_two_workers_every_fire_runs_once_and_the_ledger_agrees(e2e: E2E) -> None:
    registered: dict[str, tuple[datetime, int]] = {}
    for i in range(200):
        every = INTERVALS[i % len(INTERVALS)]
        rid = f"r{i:03d}"
        receipt = e2e.schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, rid, "count", {"every": f"{every}s"}))
        registered[rid] = (receipt.routine.registered_at, every)

    env = e2e.env()
    e2e.procs.worker("tick", env, "alma.tick", 1)
    e2e.procs.worker("w1", env, "alma.run,alma.collect", 2)
    e2e.procs.worker("w2", env, "alma.run,alma.collect", 2)
    for name in ("tick", "w1", "w2"):
        wait_worker_ready(e2e.procs, name)
    start = utcnow()
    clocks = [e2e.procs.start(f"clock{i}", [ALMA, "clock", "run", "--every", "1s"], env) for i in range(3)]
    time.sleep(SECONDS)
    for clock in clocks:
        assert e2e.procs.stop(clock) == 0

    def drained() -> bool:
        rows = e2e.sql("SELECT count(*) FROM alma.runs WHERE state IN ('claimed', 'running')")
        return rows[0][0] == 0

    wait_for(drained, 60, 0.5, "every claimed fire to finish")

    effects = e2e.effects()
    ledger = e2e.ledger()
    duplicates = {k: n for k, n in effects.items() if n > 1}
    assert not duplicates, f"fires executed more than once: {list(duplicates.items())[:5]}"
    completed = {k for k, (state, _) in ledger.items() if state == "completed"}
    assert set(effects) == completed  # the ledger agrees with the side effects, both ways
    states = Counter((state, reason) for state, reason in ledger.values())
    assert set(states) <= {("completed", "ok"), ("skipped", "missed"), ("skipped", "overlap")}, states

    # every fire of each routine up to its cursor is exactly one ledger row or counted on the routine
    # (fires_missed: collapsed by a tick that came after more than one of its fires); counts, not speed
    decided = collapsed = 0
    for rid, (registered_at, every) in registered.items():
        routine = e2e.schedule.store.get_routine(SCOPE, rid)
        assert routine is not None and routine.last_fire is not None and routine.last_fire >= start, rid
        real = expected_fires(registered_at, every, registered_at, routine.last_fire)
        rows = {k[3] for k in ledger if k[2] == rid}
        assert rows <= real, f"{rid}: run ids that are no fire of 'every {every}s': {sorted(rows - real)[:3]}"
        assert not routine.fires_missed_capped
        assert len(real) == len(rows) + routine.fires_missed, (rid, len(real), len(rows), routine.fires_missed)
        decided += len(rows)
        collapsed += routine.fires_missed
    tick_log = e2e.procs.log("tick")
    ticks = tick_log.count("] succeeded in")
    assert ticks >= 1 and decided > 0
    print(
        f"\n{SECONDS:.0f}s, 3 clocks: {ticks} ticks ran, {tick_log.count('Discarding revoked')} expired; "
        f"{decided} fires decided, {collapsed} collapsed and counted; whole ledger {dict(states)}"
    )


# --------------------------------------------------------------------------- kills


def test_a_worker_killed_between_dispatch_and_running_is_resent_and_runs_once(e2e: E2E) -> None:
    due_now(e2e, "resend-me")
    marker = e2e.tmp_path / "kill-once"
    marker.write_text("x")
    doomed = e2e.procs.worker("doomed", e2e.env(E2E_KILL_ONCE=str(marker)), "alma.run", 1, "-I", "e2e_runners")
    wait_worker_ready(e2e.procs, "doomed")

    first = e2e.schedule.tick()
    (key,) = first.claimed
    wait_for(lambda: doomed.poll() is not None, 30, what="the doomed worker to die in task_prerun")
    assert doomed.returncode == -signal.SIGKILL and not marker.exists()
    assert e2e.state(key) == "claimed" and not e2e.effects()

    e2e.procs.worker("healthy", e2e.env(), "alma.run", 1)
    wait_worker_ready(e2e.procs, "healthy")
    claimed = e2e.schedule.store.get(key)
    assert claimed is not None and claimed.resend_at is not None
    resend_at = claimed.resend_at
    wait_for(lambda: utcnow() >= resend_at, 30, what="the fire's first re-send to be due")
    again = e2e.schedule.tick()
    assert key in again.resent
    wait_for(lambda: e2e.state(key) == "completed", 30, what="the re-sent fire to run")
    later = e2e.schedule.tick(now=utcnow() + timedelta(seconds=5))
    assert key not in later.resent
    assert e2e.effects() == Counter({(key.org, key.uid, key.routine_id, key.run_id): 1})


def test_a_worker_killed_mid_run_stays_running_is_never_rerun_and_is_blocked(e2e: E2E) -> None:
    limit = timedelta(seconds=2)
    e2e.schedule = create_schedule(
        store=e2e.schedule.store,
        runner=lambda routine: count_factory(e2e.settings),
        dispatcher=e2e.schedule.dispatcher,
        settings=e2e.settings.replace(run_time_limit=limit),
    )
    due_now(e2e, "slow", {"sleep": 60})
    env = e2e.env(ALMA_RUN_TIME_LIMIT="2s")
    victim = e2e.procs.worker("victim", env, "alma.run", 1)
    wait_worker_ready(e2e.procs, "victim")
    (key,) = e2e.schedule.tick().claimed
    wait_for(lambda: e2e.effects(), 20, 0.02, "the slow run to start")
    e2e.procs.kill(victim)  # parent and pool child, mid-run
    started = utcnow()
    assert e2e.state(key) == "running"

    e2e.procs.worker("survivor", env, "alma.run", 1)
    wait_worker_ready(e2e.procs, "survivor")
    time.sleep(max(0.0, (started + 2 * limit - utcnow()).total_seconds()) + 0.5)
    report = e2e.schedule.tick()
    assert key in report.blocked and not report.resent
    assert report.to_dict()["blocked"] == 1
    assert key in [r.key for r in e2e.schedule.store.stuck(utcnow(), limit)]
    with pytest.raises(Overlap):
        e2e.schedule.trigger(SCOPE, "slow")  # never in parallel with itself
    time.sleep(1)
    assert e2e.state(key) == "running"
    assert e2e.effects() == Counter({(key.org, key.uid, key.routine_id, key.run_id): 1})


# --------------------------------------------------------------------------- overlap latest

EVERY = 6  # seconds: the buffered fire's window (until the next fire) outlasts the release by seconds


def test_a_buffered_fire_runs_right_after_the_slow_run_once_never_in_parallel(e2e: E2E) -> None:
    """Overlap latest: the fire due during a slow run waits buffered; the WORKER that ends the run
    releases and sends it (no tick runs after the gate opens): it runs right after, exactly once,
    never in parallel, on a worker that could run two at once."""
    schedule, procs = e2e.schedule, e2e.procs
    gate = e2e.tmp_path / "gate"
    timing = {"every": f"{EVERY}s", "overlap": "latest"}
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "slow", "count", timing, {"gate": str(gate)})
    schedule.register(spec, now=utcnow() - timedelta(seconds=EVERY - 1))  # the first fire is due in a second
    procs.worker("w", e2e.env(), "alma.run,alma.collect", 2)
    wait_worker_ready(procs, "w")

    def state(run_id: str) -> str | None:
        rec = schedule.store.get(RunKey.of(SCOPE, "slow", run_id))
        return None if rec is None else rec.state

    first = wait_for(lambda: schedule.tick().claimed, 30, 0.2, "the first fire to be claimed")[0]
    wait_for(lambda: state(first.run_id) == "running", 30, what="the first run to start")
    buffered = wait_for(lambda: schedule.tick().buffered, 30, 0.2, "the next fire to be buffered")[0]
    assert state(first.run_id) == "running" and state(buffered.run_id) == "buffered"

    gate.write_text("open")  # the first run ends now; no tick runs from here on
    wait_for(lambda: state(buffered.run_id) == "completed", 60, what="the buffered fire to run")

    done = schedule.store.get(RunKey.of(SCOPE, "slow", first.run_id))
    after = schedule.store.get(RunKey.of(SCOPE, "slow", buffered.run_id))
    assert done is not None and after is not None and done.state == "completed"
    assert done.finished_at is not None and after.started_at is not None
    assert after.started_at >= done.finished_at  # never in parallel: it started after the first ended
    assert after.send_attempts == 0  # sent by the worker that finished the first run, not re-sent by a tick
    ran = Counter({(SCOPE.org, SCOPE.uid, "slow", first.run_id): 1, (SCOPE.org, SCOPE.uid, "slow", buffered.run_id): 1})
    assert e2e.effects() == ran  # each exactly once
    runs = schedule.runs(SCOPE, routine_id="slow", limit=100)
    assert {r.state for r in runs} <= {"completed", "skipped"}  # nothing left open or buffered
    assert all(r.reason == "overlap" for r in runs if r.state == "skipped")  # replaced buffered fires only


# --------------------------------------------------------------------------- backfill


def test_a_backfill_runs_each_missing_fire_once_on_a_real_worker(e2e: E2E) -> None:
    """An hourly routine down for 10 hours: the tick runs only the latest fire; a backfill of the
    range runs the 9 others through the run worker, one per tick, each exactly once."""
    registered = utcnow().replace(microsecond=0) - timedelta(hours=10, seconds=1)
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "late", "count", {"every": "1h"})
    e2e.schedule.register(spec, now=registered)
    e2e.procs.worker("w", e2e.env(), "alma.run", 1)
    wait_worker_ready(e2e.procs, "w")
    (live,) = e2e.schedule.tick().claimed
    wait_for(lambda: e2e.state(live) == "completed", 30, what="the latest fire to run")
    receipt = e2e.schedule.backfill(SCOPE, "late", registered + timedelta(hours=1), registered + timedelta(hours=10))
    assert (receipt.fires, receipt.already_run) == (9, 1)
    backfilled: list[RunKey] = []
    for _ in range(30):  # one fire per tick (each waited for): 9 ticks, with room to spare
        if len(backfilled) == 9:
            break
        claimed = e2e.schedule.tick().claimed
        assert len(claimed) <= 1
        for key in claimed:
            wait_for(lambda key=key: e2e.state(key) == "completed", 30, what=f"backfill fire {key.run_id}")
            backfilled.append(key)
    assert len(backfilled) == 9 and e2e.schedule.tick().claimed == ()
    assert not e2e.schedule.store.get_backfill(SCOPE, "late").pending  # type: ignore[union-attr]
    fires = {(registered + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ") for h in range(1, 11)}
    assert {k[3] for k in e2e.effects()} == fires and set(e2e.effects().values()) == {1}
    origins = Counter(r.origin for r in e2e.schedule.runs(SCOPE, routine_id="late", limit=100))
    assert origins == Counter({"backfill": 9, "schedule": 1})
