"""Every collapsed fire is counted (issue 44, part 3), end to end: a real prefork worker (with the
worker exporter) on real Redis and PostgreSQL, and a real ``alma-schedule clock run`` (following the
wake-up hint) run routines every 1 s and every 3 s; then the worker and the clock are stopped for
longer than both intervals. When they start again, the first tick claims each routine's latest fire
only (guarantee 3), and the fires that came due meanwhile are counted: on their routine
(``routines.fires_missed``, as ``routines list`` shows it) and in the new worker's
``alma_fires_missed_total{kind}``.

Counts only, never durations: every fire of each schedule up to its cursor is either one ledger row
or counted on the routine (exactly); the downtime collapsed at least one fire of each routine; the
metric equals what the store counted since the restart.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from celery_support import ALMA, Procs, alma_env, make_settings, reserved_port, utcnow, wait_for, wait_worker_ready
from e2e_runners import count_factory, create_effects_table
from prometheus_client.parser import text_string_to_metric_families

from alma_schedule.engine import create_schedule
from alma_schedule.model import NON_TERMINAL, Routine, RoutineSpec, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.stores.base import Store

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme", "downtime")
EVERY = {"fast": 1, "slow": 3}  # seconds
DOWN_FOR = 7.5  # seconds without a worker or a clock: longer than both intervals (twice the slow one's)


def _missed_metric(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "alma_fires_missed_total" and s.labels == {"kind": "count"}
    ]
    return found[0] if found else 0.0


def _routine(store: Store, routine_id: str) -> Routine:
    row = store.get_routine(SCOPE, routine_id)
    assert row is not None
    return row


def _schedule_runs(store: Store, routine_id: str) -> list[str]:
    return [r.run_id for r in store.list_runs(SCOPE, routine_id=routine_id, limit=10_000) if r.origin == "schedule"]


def _settled(store: Store) -> bool:
    """Nothing in flight: every run terminal, or claimed with its message expired (a run of an every-1s
    routine whose message waited past the next fire is discarded by the worker; the next tick would
    record it skipped(missed), and the clock is stopped: it is a ledger row either way)."""
    now = utcnow()
    return all(
        r.state not in NON_TERMINAL or (r.state == "claimed" and r.expires_at is not None and r.expires_at <= now)
        for r in store.list_runs(SCOPE, limit=10_000)
    )


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.stop_all()


def _start(procs: Procs, name: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    """A worker serving the tick and run queues (its exporter on), ready, then a hint-following clock."""
    worker = procs.worker(name, env, "alma.tick,alma.run", 2)
    wait_worker_ready(procs, name)
    return worker, procs.start(f"clock-{name}", [ALMA, "clock", "run"], env)


def test_fires_that_came_due_while_workers_and_clock_were_down_are_counted_on_the_routine_and_in_the_metric(
    pg_url: str, redis_url: str, tmp_path: Path, procs: Procs
) -> None:
    migrate_store(pg_url)
    create_effects_table(pg_url)
    settings = make_settings(pg_url, redis_url)
    store = open_store(pg_url)
    try:
        registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"count": count_factory})
        engine = create_schedule(store=store, runner=registry.resolve, settings=settings)  # registration only
        for rid, seconds in EVERY.items():
            engine.register(RoutineSpec(SCOPE.org, SCOPE.uid, rid, "count", {"every": f"{seconds}s"}, {}), now=utcnow())

        # 1. up: both routines run on the schedule
        with reserved_port() as port:
            env = alma_env(
                settings, tmp_path, ALMA_METRICS_PORT=str(port), PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "p1")
            )
            worker, clock = _start(procs, "w1", env)
            wait_for(lambda: all(len(_schedule_runs(store, rid)) >= 2 for rid in EVERY), 60, 0.2, "two runs each")

            # 2. down: the clock, then the worker (a warm shutdown: its tasks finish)
            assert procs.stop(clock) == 0
            procs.stop(worker)
        wait_for(lambda: _settled(store), 30, 0.2, "the runs of the first worker to end")
        before = {rid: _routine(store, rid) for rid in EVERY}
        time.sleep(DOWN_FOR)  # the fires that come due now find no tick

        # 3. up again: a new worker (its counters start at zero) and a new clock
        with reserved_port() as port:
            env = alma_env(
                settings, tmp_path, ALMA_METRICS_PORT=str(port), PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "p2")
            )
            worker, clock = _start(procs, "w2", env)
            restart = utcnow()

            def claimed_after_restart() -> bool:
                rows = {rid: _routine(store, rid) for rid in EVERY}
                return all(
                    r.last_fire is not None and r.last_fire >= restart - timedelta(seconds=1) for r in rows.values()
                )

            wait_for(claimed_after_restart, 60, 0.2, "a claim of each routine after the restart")
            assert procs.stop(clock) == 0
            wait_for(lambda: _settled(store), 30, 0.2, "the runs of the second worker to end")
            after = {rid: _routine(store, rid) for rid in EVERY}
            counted = sum(after[rid].fires_missed - before[rid].fires_missed for rid in EVERY)
            # the metric is raised after the tick's commit: wait for the worker's last tick to report
            wait_for(lambda: _missed_metric(port) == counted, 30, 0.2, f"alma_fires_missed_total == {counted}")
            after = {rid: _routine(store, rid) for rid in EVERY}  # no tick since: the same counts
            assert sum(after[rid].fires_missed - before[rid].fires_missed for rid in EVERY) == counted
            procs.stop(worker)

        for rid, seconds in EVERY.items():
            row, was = after[rid], before[rid]
            assert row.fires_missed - was.fires_missed >= 1, f"{rid}: the downtime collapsed at least one fire"
            assert not row.fires_missed_capped
            # every fire of the schedule up to the cursor is one ledger row, or counted on the routine
            assert row.last_fire is not None and was.last_fire is not None
            fires = int((row.last_fire - row.registered_at).total_seconds()) // seconds  # k >= 1: r + k * step
            runs = _schedule_runs(store, rid)
            assert len(runs) == len(set(runs))
            assert len(runs) + row.fires_missed == fires, (rid, len(runs), row.fires_missed, fires)
            # the fires of the downtime: none has a row, each is counted
            between = int((row.last_fire - was.last_fire).total_seconds()) // seconds
            assert between >= 2
        listing = subprocess.run(
            [ALMA, "routines", "list", str(SCOPE), "--json"],
            env=alma_env(settings, tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert all(f'"fires_missed": {after[rid].fires_missed}' in listing for rid in EVERY), listing
    finally:
        store.close()
