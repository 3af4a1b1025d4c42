"""Overlap ``latest`` with a real worker on real Redis and PostgreSQL (``slow``).

A slow routine (``every 6s``, ``overlap: latest``; each run lasts until the test opens a gate) on a
worker that could run two tasks at once (prefork, 2 children): the fire that comes due during the
run waits ``buffered``; when the run ends, the WORKER's finish releases it and sends it (no tick
runs after the gate opens), and it runs right after, exactly once (counted by the side effects the
test runner writes to its own table), never in parallel with the first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from celery_support import Procs, alma_env, make_settings, utcnow, wait_for, wait_worker_ready
from e2e_runners import count_factory, create_effects_table, libpq_url

from alma_schedule.celery import create_app
from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.model import RoutineSpec, RunKey, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.tasks import CeleryDispatcher

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme", "e2e")
EVERY = 6  # seconds: the buffered fire's window (until the next fire) outlasts the release by seconds


@pytest.fixture
def parts(pg_url: str, redis_url: str, tmp_path: Path) -> Iterator[tuple[Settings, Scheduler, Procs]]:
    migrate_store(pg_url)
    create_effects_table(pg_url)
    settings = make_settings(pg_url, redis_url)
    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"count": count_factory})
    app = create_app(settings, registry=registry)
    store = open_store(pg_url)
    schedule = create_schedule(
        store=store, runner=registry.resolve, dispatcher=CeleryDispatcher(app, settings), settings=settings
    )
    procs = Procs(tmp_path)
    try:
        yield settings, schedule, procs
    finally:
        procs.stop_all()
        store.close()


def _effects(settings: Settings) -> Counter[str]:
    with psycopg.connect(libpq_url(settings.database_url)) as conn:
        return Counter(r[0] for r in conn.execute("SELECT run_id FROM e2e_effects").fetchall())


def test_a_buffered_fire_runs_right_after_the_slow_run_once_never_in_parallel(parts, tmp_path: Path) -> None:
    settings, schedule, procs = parts
    gate = tmp_path / "gate"
    timing = {"every": f"{EVERY}s", "overlap": "latest"}
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "slow", "count", timing, {"gate": str(gate)})
    schedule.register(spec, now=utcnow() - timedelta(seconds=EVERY - 1))  # the first fire is due in a second
    procs.worker("w", alma_env(settings, tmp_path), "alma.run,alma.collect", 2)
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
    assert _effects(settings) == Counter({first.run_id: 1, buffered.run_id: 1})  # each exactly once
    runs = schedule.runs(SCOPE, routine_id="slow", limit=100)
    assert {r.state for r in runs} <= {"completed", "skipped"}  # nothing left open or buffered
    assert all(r.reason == "overlap" for r in runs if r.state == "skipped")  # replaced buffered fires only
