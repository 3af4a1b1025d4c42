"""The tasks through a real in-process worker on the real Redis, with PostgreSQL and SQLite stores."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import redis
from celery import Celery
from celery_support import Recorder, inprocess_worker, make_settings, ready_app, utcnow, wait_for

from alma_schedule.celery import create_app
from alma_schedule.clock import send_tick
from alma_schedule.errors import ConfigurationError
from alma_schedule.model import RUN_TASK, TICK_TASK, RoutineSpec, RunKey, RunResult, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import composition_of, parse_now

pytestmark = [pytest.mark.redis]

QUEUES = ["alma.tick", "alma.run", "alma.collect"]
SCOPE = Scope("acme", "u1")


def register_due(app: Celery, n: int) -> None:
    """``n`` routines whose ``every 1h`` fire is due now (registered an hour and a second ago).

    Its window stays open for an hour: a minute boundary passing mid-test changes nothing (an
    every-minute cron fire would expire at the next minute, and a later tick would claim a new one).
    """
    schedule = composition_of(app).schedule()  # type: ignore[union-attr]
    ago = utcnow() - timedelta(hours=1, seconds=1)
    for i in range(n):
        schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, f"r{i}", "noop", {"every": "1h"}), now=ago)


def runs(app: Celery, state: str | None = None) -> list:
    return composition_of(app).store().list_runs(SCOPE, state=state, limit=1000)  # type: ignore[union-attr]


@pytest.mark.postgres
def test_a_clock_tick_claims_and_the_worker_runs_each_fire_once(pg_url: str, redis_url: str) -> None:
    migrate_store(pg_url)
    settings = make_settings(pg_url, redis_url)
    recorder = Recorder()
    app = ready_app(settings, recorder)
    register_due(app, 5)
    try:
        with inprocess_worker(app, QUEUES):
            first = send_tick(settings)
            report = app.AsyncResult(first).get(timeout=30)
            assert report["claimed"] == 5 and report["errors"] == 0
            wait_for(lambda: len(runs(app, "completed")) == 5, what="5 completed runs")
            again = app.AsyncResult(send_tick(settings)).get(timeout=30)
            assert again["claimed"] == 0  # the same fire: nothing new, nothing twice
        assert sorted(k.routine_id for k in recorder.keys) == [f"r{i}" for i in range(5)]
        assert composition_of(app).store().last_tick() is not None  # type: ignore[union-attr]
    finally:
        composition_of(app).close()  # type: ignore[union-attr]


def test_a_tick_never_claims_ahead_of_the_worker_clock(sqlite_url: str, redis_url: str) -> None:
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, redis_url)
    app = ready_app(settings, Recorder())
    try:
        with inprocess_worker(app, QUEUES):
            report = app.send_task(TICK_TASK, kwargs={"now": "2999-01-01T00:00:00Z"}).get(timeout=30)
        assert report["at"] < "2100"  # min(given, worker clock)
        assert report["at"] <= utcnow().isoformat()
    finally:
        composition_of(app).close()  # type: ignore[union-attr]


def test_parse_now_takes_the_earlier_of_given_and_clock() -> None:
    from datetime import UTC, datetime

    from alma_schedule.errors import InvalidInput

    clock = datetime(2026, 1, 1, 12, tzinfo=UTC)
    settings = Settings(clock=lambda: clock)
    assert parse_now(None, settings) == clock
    assert parse_now("2026-01-01T11:00:00Z", settings) == datetime(2026, 1, 1, 11, tzinfo=UTC)
    assert parse_now("2027-01-01T00:00:00+00:00", settings) == clock
    for bad in ("2026-01-01T11:00:00", "yesterday", 5):
        with pytest.raises(InvalidInput):
            parse_now(bad, settings)  # type: ignore[arg-type]


def test_pickle_is_refused_and_an_expired_run_message_is_discarded(sqlite_url: str, redis_url: str) -> None:
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, redis_url)
    recorder = Recorder()
    app = ready_app(settings, recorder)
    schedule = composition_of(app).schedule()  # type: ignore[union-attr]
    three_hours_ago = utcnow() - timedelta(hours=3)
    schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, "p", "noop", {"every": "1d"}), now=three_hours_ago)
    schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, "x", "noop", {"every": "1d"}), now=three_hours_ago)
    r = redis.Redis.from_url(redis_url)
    try:
        # a manual run claimed two hours ago: its message (sent by trigger) expired an hour ago
        expired = schedule.trigger(SCOPE, "x", now=utcnow() - timedelta(hours=2))
        with inprocess_worker(app, QUEUES):
            wait_for(lambda: r.llen("alma.run") == 0, what="the expired message consumed")
            # the same kind of message in pickle: refused and dropped by the JSON-only worker
            pending = schedule.store.claim_manual(
                RunKey.of(SCOPE, "p", "manual:01PICKLE"),
                now=utcnow(),
                expires_at=utcnow() + timedelta(hours=1),
                resend_at=utcnow() + timedelta(hours=1),
            ).record
            assert pending is not None
            app.send_task(RUN_TASK, args=pending.key.args(), serializer="pickle", ignore_result=True)
            wait_for(lambda: r.llen("alma.run") == 0, what="the pickle message consumed")
            report = app.send_task(TICK_TASK).get(timeout=30)  # worker is solo: the message is gone
            assert schedule.store.get(RunKey.of(SCOPE, "p", pending.run_id)).state == "claimed"  # type: ignore[union-attr]
            assert report["skipped"] >= 1  # the expired manual run: skipped(missed) by the sweep
            final = schedule.store.get(RunKey.of(SCOPE, "x", expired.run_id))
            assert final is not None and (final.state, final.reason) == ("skipped", "missed")
            # the JSON message of the same fire runs it
            app.send_task(RUN_TASK, args=pending.key.args(), ignore_result=True)
            wait_for(
                lambda: schedule.store.get(RunKey.of(SCOPE, "p", pending.run_id)).state == "completed",  # type: ignore[union-attr]
                what="the JSON run",
            )
        assert [k.run_id for k in recorder.keys] == ["manual:01PICKLE"]
    finally:
        r.close()
        composition_of(app).close()  # type: ignore[union-attr]


def test_a_worker_that_cannot_serve_a_stored_kind_refuses_to_start(sqlite_url: str, redis_url: str) -> None:
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, redis_url)
    recorder = Recorder()

    def needs_webhook(s: Settings) -> Recorder:
        if not s.webhook_url:
            raise ConfigurationError("ALMA_WEBHOOK_URL is not set")
        return recorder

    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"noop": lambda s: recorder})
    app = create_app(settings, registry=registry)
    schedule = composition_of(app).schedule()  # type: ignore[union-attr]
    schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, "ok", "noop", {"every": "1h"}))
    # registered through a process that could serve it; this worker's configuration cannot
    registry.register("hooked", lambda s: recorder)
    schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, "h", "hooked", {"every": "1h"}))
    registry.register("hooked", needs_webhook)
    try:
        with pytest.raises(ConfigurationError, match="ALMA_WEBHOOK_URL"), inprocess_worker(app, ["alma.run"]):
            pass
        # a tick-only worker does not run runners: it starts
        with inprocess_worker(app, ["alma.tick"]):
            pass
    finally:
        composition_of(app).close()  # type: ignore[union-attr]


@pytest.mark.postgres
def test_a_forked_child_drops_the_parents_pool_and_the_parent_keeps_its_own(pg_url: str) -> None:
    import os

    from celery.signals import worker_process_init

    migrate_store(pg_url)
    settings = make_settings(pg_url, "memory://")
    app = ready_app(settings, Recorder())
    composition = composition_of(app)
    assert composition is not None
    parent_store = composition.store()
    parent_store.heartbeat(utcnow())  # a pooled connection now exists in the parent

    def backend_pid() -> int:
        with parent_store.engine.connect() as conn:  # type: ignore[attr-defined]
            return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())

    before = backend_pid()
    try:
        pid = os.fork()
        if pid == 0:  # the prefork child: what Celery does right after fork
            code = 1
            try:
                worker_process_init.send(sender=None)
                child_store = composition.store()
                ok = child_store is not parent_store and child_store.last_tick() is not None
                child_store.close()
                code = 0 if ok else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        # the child closed only its own connections: the parent's pooled one is the same session
        assert composition.store() is parent_store
        assert backend_pid() == before
        assert parent_store.last_tick() is not None
    finally:
        composition.close()


class Submitting(Recorder):
    """Submits a background job on run; the first collect finds it done and delivers."""

    def __init__(self) -> None:
        super().__init__()
        self.collected: list[str] = []

    def run(self, routine: object, handle: object) -> RunResult:
        h: Any = handle
        h.submit("batch-1", h.now + timedelta(hours=1), next_poll_at=h.now)
        return RunResult.submitted()

    def collect(self, routine: object, handle: object) -> RunResult:
        h: Any = handle
        self.collected.append(h.key.run_id)
        if not h.begin_collecting():
            return RunResult.submitted()
        return RunResult.completed("delivered")


def test_a_submitted_run_is_collected_through_the_collect_queue(sqlite_url: str, redis_url: str) -> None:
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, redis_url)
    runner = Submitting()
    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"job": lambda s: runner})
    app = create_app(settings, registry=registry)
    composition = composition_of(app)
    assert composition is not None
    schedule = composition.schedule()
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "j", "job", {"every": "1h"})
    schedule.register(spec, now=utcnow() - timedelta(hours=1, seconds=1))  # one fire due now, open for an hour
    store = composition.store()
    try:
        with inprocess_worker(app, ["alma.run", "alma.collect"]):
            (key,) = schedule.tick().claimed
            wait_for(lambda: store.get(RunKey.of(SCOPE, "j", key.run_id)).state == "submitted", what="submitted")  # type: ignore[union-attr]
            report = schedule.tick()
            assert report.collect == (key,)
            wait_for(lambda: store.get(RunKey.of(SCOPE, "j", key.run_id)).state == "completed", what="collected")  # type: ignore[union-attr]
        final = store.get(RunKey.of(SCOPE, "j", key.run_id))
        assert final is not None and final.reason == "delivered"
        assert runner.collected == [key.run_id]
    finally:
        composition.close()


class Sleeper(Recorder):
    """A runner that takes a second."""

    def run(self, routine: Any, handle: Any) -> RunResult:
        import time

        time.sleep(1.0)
        return super().run(routine, handle)


@pytest.mark.postgres
@pytest.mark.parametrize(("due", "batch_size"), [(1, 20), (3, 2)], ids=["run", "run_many"])
def test_a_run_through_the_worker_lasts_what_its_runner_took(
    pg_url: str, redis_url: str, due: int, batch_size: int
) -> None:
    """The run and run_many tasks finish at the clock read after the runner, not at the start."""
    migrate_store(pg_url)
    settings = make_settings(pg_url, redis_url, run_batch_size=batch_size)
    app = ready_app(settings, Sleeper())
    register_due(app, due)
    try:
        with inprocess_worker(app, QUEUES):
            assert app.AsyncResult(send_tick(settings)).get(timeout=30)["claimed"] == due
            wait_for(lambda: len(runs(app, "completed")) == due, timeout=60, what=f"{due} completed runs")
        for record in runs(app, "completed"):
            assert record.finished_at - record.started_at >= timedelta(seconds=1), record
    finally:
        composition_of(app).close()  # type: ignore[union-attr]
