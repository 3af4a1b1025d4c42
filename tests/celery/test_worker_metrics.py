"""The worker exporter (issue 17) on a real prefork worker over real Redis and PostgreSQL: after a
few real ticks its counters, parsed with prometheus_client's parser, match the ledger."""

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
from alma_schedule.model import NON_TERMINAL, RoutineSpec, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.stores import migrate_store, open_store

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme", "metrics")


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.stop_all()


def test_the_worker_exporters_counters_match_the_ledger(
    pg_url: str, redis_url: str, tmp_path: Path, procs: Procs
) -> None:
    migrate_store(pg_url)
    create_effects_table(pg_url)
    settings = make_settings(pg_url, redis_url)
    store = open_store(pg_url)
    try:
        registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"count": count_factory})
        engine = create_schedule(store=store, runner=registry.resolve, settings=settings)  # registration only
        for n in range(4):
            spec = RoutineSpec(SCOPE.org, SCOPE.uid, f"m{n}", "count", {"every": "1h"}, {})
            engine.register(spec, now=utcnow() - timedelta(hours=1, seconds=1), mode="upsert")
        stale = tmp_path / "prom" / "stale.db"
        stale.parent.mkdir()
        stale.write_bytes(b"left by an earlier worker")
        with reserved_port() as port:
            env = alma_env(
                settings, tmp_path, ALMA_METRICS_PORT=str(port), PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom")
            )
            procs.worker("w", env, "alma.tick,alma.run", 2)
            wait_worker_ready(procs, "w")
            assert not stale.exists()  # the directory is wiped at start
            for _ in range(3):
                send_tick(settings)

            def settled() -> bool:
                runs = store.list_runs(SCOPE, limit=100)
                return len(runs) == 4 and all(r.state not in NON_TERMINAL for r in runs)

            wait_for(settled, 60, 0.2, "every claimed fire to finish")
            wait_for(lambda: _scrape(port).get(("alma_ticks_total", ())) == 3, 60, 0.2, "three ticks counted")
            samples = _scrape(port)
        runs = store.list_runs(SCOPE, limit=100)
    finally:
        store.close()
    assert samples[("alma_fires_claimed_total", (("kind", "count"),))] == len(runs) == 4
    done = [r for r in runs if r.state == "completed" and r.reason == "ok"]
    assert samples[("alma_runs_finished_total", (("reason", "ok"), ("state", "completed")))] == len(done) == 4
    assert samples[("alma_fire_lag_seconds_count", ())] == 4
    assert samples[("alma_tick_duration_seconds_count", ())] == 3
    assert not any(name == "alma_errors_total" for name, _ in samples)
