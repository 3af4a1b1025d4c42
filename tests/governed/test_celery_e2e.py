"""A ``turn`` and a ``job`` routine end to end through the real Celery path: the kind registry builds
the governed runners from settings (``ALMA_PROVIDER=scripted``, a file sink), a real worker on Redis
runs the ticks, the run messages and the collect messages, over PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from alma_schedule.celery import create_app
from alma_schedule.clock import send_tick
from alma_schedule.model import Ceiling, RoutineSpec, Scope, governed_key
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import composition_of

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    # redis-py deprecates the call Celery's Redis result backend makes, in the worker's thread
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]

QUEUES = ["alma.tick", "alma.run", "alma.collect"]
SCOPE = Scope("acme", "u1")


@contextlib.contextmanager
def worker(app: Any) -> Iterator[Any]:
    """A real worker in a thread of this process (solo pool); the current/default app restored after."""
    from celery import _state
    from celery.contrib.testing.worker import start_worker

    default, current = _state.default_app, _state._tls.current_app
    try:
        with start_worker(
            app, pool="solo", perform_ping_check=False, queues=QUEUES, loglevel="WARNING", shutdown_timeout=30
        ) as w:
            yield w
    finally:
        _state.default_app, _state._tls.current_app = default, current


def wait_for(predicate: Any, what: str, describe: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {describe()}")
        time.sleep(0.05)


def wait_first_poll_due(store: Any, describe: Any) -> None:
    """Until the wall clock (the tick's clock) reaches the submitted job's first poll."""
    (job,) = store.list_runs(SCOPE, routine_id="digest", limit=5)
    due = job.next_poll_at
    assert job.state == "submitted" and due is not None, describe()
    wait_for(lambda: datetime.now(UTC) >= due, "the first poll due", describe)


def test_turn_and_job_routines_through_real_workers(pg_url: str, redis_url: str, tmp_path: Path) -> None:
    migrate_store(pg_url)
    out = tmp_path / "deliveries.jsonl"
    settings = Settings(
        database_url=pg_url,
        broker_url=redis_url,
        result_backend=redis_url,
        provider="scripted",
        sink=f"file:{out}",
        poll_first=timedelta(seconds=1),
        ceiling_org_daily_micros=1_000_000,
        cap_per_run_micros=100_000,
    )
    app = create_app(settings)
    comp = composition_of(app)
    assert comp is not None
    schedule = comp.schedule()
    # one fire of each due now, its window open for an hour: a minute boundary passing mid-test
    # neither closes it nor makes a later tick claim a new fire (as an every-minute cron would)
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1, seconds=1)
    for routine_id, kind in (("brief", "turn"), ("digest", "job")):
        schedule.register(
            RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, kind, {"every": "1h"}, {"goal": f"{routine_id}!"}),
            now=an_hour_ago,
        )
    store = comp.store()

    def state(routine_id: str) -> str | None:
        runs = store.list_runs(SCOPE, routine_id=routine_id, limit=5)
        return runs[0].state if runs else None

    def rows() -> list[tuple[Any, ...]]:
        return [
            (r.routine_id, r.run_id, r.state, r.reason, r.error_class, r.next_poll_at, r.deadline)
            for r in store.list_runs(SCOPE, limit=10)
        ]

    try:
        with worker(app):
            report = app.AsyncResult(send_tick(settings)).get(timeout=30)
            assert report["claimed"] == 2 and report["errors"] == 0, (
                report,
                [
                    (r.routine_id, r.last_fire, r.next_due_at, r.registered_at, r.last_error)
                    for r in store.iter_routines()
                ],
            )
            wait_for(lambda: state("brief") == "completed", "the turn delivered", rows)
            wait_for(lambda: state("digest") == "submitted", "the job submitted", rows)
            wait_first_poll_due(store, rows)
            report = app.AsyncResult(send_tick(settings)).get(timeout=30)
            assert report["collect"] == 1, (report, rows())
            wait_for(lambda: state("digest") == "completed", "the job collected and delivered", rows)
            app.AsyncResult(send_tick(settings)).get(timeout=30)  # a later tick changes nothing
        (turn,) = store.list_runs(SCOPE, routine_id="brief")
        (job,) = store.list_runs(SCOPE, routine_id="digest")
        assert (turn.reason, job.reason) == ("delivered", "delivered")
        assert turn.session_id and job.batch_id == "scripted-" + governed_key(SCOPE, "digest", job.run_id)
        assert turn.cost_micros > 0 and job.cost_micros > 0
        assert (turn.reserved_micros, job.reserved_micros) == (0, 0)
        day = turn.fire_at.date().isoformat()
        assert store.spend(Ceiling.org_key(SCOPE.org), day) == turn.cost_micros + job.cost_micros
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted((d["routine_id"], d["idempotency_key"]) for d in lines) == [
            ("brief", governed_key(SCOPE, "brief", turn.run_id)),
            ("digest", governed_key(SCOPE, "digest", job.run_id)),
        ]
    finally:
        comp.close()
        store.close()  # the worker's shutdown may have closed it already; our reads reopen a pool


@pytest.mark.slow
def test_a_prefork_worker_configured_from_the_environment_serves_turn_and_job(
    pg_url: str, redis_url: str, tmp_path: Path
) -> None:
    """``celery -A alma_schedule.celery worker`` in its own process: the governed kinds are built by
    the registry's factories from ``ALMA_*`` variables alone (``ALMA_PROVIDER=scripted``)."""
    import os
    import signal
    import subprocess
    import sys

    from alma_schedule.engine import create_schedule
    from alma_schedule.runners.registry import KindRegistry
    from alma_schedule.settings import load_settings
    from alma_schedule.stores import open_store

    migrate_store(pg_url)
    out = tmp_path / "deliveries.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    alma = {
        "ALMA_DATABASE_URL": pg_url,
        "ALMA_BROKER_URL": redis_url,
        "ALMA_RESULT_BACKEND": redis_url,
        "ALMA_PROVIDER": "scripted",
        "ALMA_SINK": f"file:{out}",
        "ALMA_POLL_FIRST": "1s",
        "ALMA_CEILING_ORG_DAILY_MICROS": "1000000",
        "ALMA_CAP_PER_RUN_MICROS": "100000",
    }
    env.update(alma)
    settings = load_settings(environ=alma)
    store = open_store(pg_url)
    schedule = create_schedule(store=store, runner=KindRegistry(settings), settings=settings)
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1, seconds=1)  # one fire due now, open for an hour
    for routine_id, kind in (("brief", "turn"), ("digest", "job")):
        schedule.register(
            RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, kind, {"every": "1h"}, {"goal": routine_id}),
            now=an_hour_ago,
        )
    log = tmp_path / "worker.log"
    celery = str(Path(sys.executable).parent / "celery")
    argv = [celery, "-A", "alma_schedule.celery", "worker", "-Q", ",".join(QUEUES), "-c", "2", "-n", "gov@%h"]
    argv += ["--loglevel", "INFO", "--without-mingle", "--without-gossip"]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)

    def rows() -> Any:
        return [
            (r.routine_id, r.state, r.reason, r.error_class) for r in store.list_runs(SCOPE, limit=10)
        ], log.read_text(errors="replace")[-2000:]

    def state(routine_id: str) -> str | None:
        runs = store.list_runs(SCOPE, routine_id=routine_id, limit=5)
        return runs[0].state if runs else None

    try:
        wait_for(lambda: "ready." in log.read_text(errors="replace") or proc.poll() is not None, "worker ready", rows)
        assert proc.poll() is None, rows()
        send_tick(settings)
        wait_for(lambda: state("brief") == "completed" and state("digest") == "submitted", "run and submit", rows)
        wait_first_poll_due(store, rows)
        send_tick(settings)
        wait_for(lambda: state("digest") == "completed", "the job collected", rows)
        (turn,) = store.list_runs(SCOPE, routine_id="brief")
        (job,) = store.list_runs(SCOPE, routine_id="digest")
        assert (turn.reason, job.reason) == ("delivered", "delivered")
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted(d["run_id"] for d in lines) == sorted([turn.run_id, job.run_id])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # stray pool children, if any
        store.close()
