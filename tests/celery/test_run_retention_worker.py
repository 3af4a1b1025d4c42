"""The run retention on a real prefork worker over real Redis and PostgreSQL: with
``ALMA_RUN_RETENTION=1d`` a tick the worker runs deletes the runs that ended three days ago, keeps the
one that ended an hour ago and the open one, raises ``pruned_through``, and the worker exporter counts
``alma_runs_pruned_total``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from celery_support import Procs, alma_env, make_settings, reserved_port, utcnow, wait_for, wait_worker_ready
from e2e_runners import count_factory, create_effects_table
from prometheus_client.parser import text_string_to_metric_families

from alma_schedule.clock import send_tick
from alma_schedule.engine import create_schedule
from alma_schedule.model import RoutineSpec, RunResult, RunState, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.testing.builders import TIMERS, fire_next_due

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme", "retention")
ONCE = fire_next_due(timedelta(days=365), timedelta(hours=1))  # the next fire a year on: no tick claims it


def _pruned_total(port: int) -> float | None:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "alma_runs_pruned_total":
                return s.value
    return None


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.stop_all()


def test_a_worker_tick_prunes_the_runs_past_the_retention_and_counts_them(
    pg_url: str, redis_url: str, tmp_path: Path, procs: Procs
) -> None:
    migrate_store(pg_url)
    create_effects_table(pg_url)
    settings = make_settings(pg_url, redis_url)
    store = open_store(pg_url)
    try:
        registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"count": count_factory})
        engine = create_schedule(store=store, runner=registry.resolve, settings=settings)  # registration only
        old, recent = utcnow() - timedelta(days=3), utcnow() - timedelta(hours=1)
        ended = {}
        for n, at in enumerate([old, old, old, recent, old]):
            spec = RoutineSpec(SCOPE.org, SCOPE.uid, f"r{n}", "count", {"every": "1h"}, {})
            engine.register(spec, now=at - timedelta(hours=1), mode="upsert")
            [rec] = store.claim_due(at, 10, ONCE, TIMERS).claimed
            store.start(rec.key, now=at)
            if n < 4:  # r4's run stays open (running since three days)
                store.finish(rec.key, RunResult.completed("ok"), now=at, timers=TIMERS)
            ended[rec.routine_id] = rec
        with reserved_port() as port:
            env = alma_env(
                settings,
                tmp_path,
                ALMA_RUN_RETENTION="1d",
                ALMA_METRICS_PORT=str(port),
                PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"),
            )
            procs.worker("w", env, "alma.tick,alma.run", 1)
            wait_worker_ready(procs, "w")
            send_tick(settings)
            wait_for(lambda: _pruned_total(port) == 3, 60, 0.2, "alma_runs_pruned_total == 3")
        # (the worker's first tick re-derives every cursor for its zone data: new fires may run meanwhile)
        assert [store.get(ended[f"r{n}"].key) is None for n in range(5)] == [True, True, True, False, False]
        assert store.get(ended["r4"].key).state == RunState.RUNNING  # type: ignore[union-attr]  # open 3 days
        for rid in ("r0", "r1", "r2"):
            assert store.get_routine(SCOPE, rid).pruned_through == ended[rid].fire_at  # type: ignore[union-attr]
        assert store.get_routine(SCOPE, "r3").pruned_through is None  # type: ignore[union-attr]
    finally:
        store.close()
