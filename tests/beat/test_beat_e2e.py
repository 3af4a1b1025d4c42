"""End to end: a fleet app with three tasks, its beat_schedule imported, one worker, two clocks.

alma-schedule is installed on the fleet's own app (the existing-fleet path); one in-process worker
(threads pool, 4 threads) serves the tick, run and collect queues and the fleet's tasks, all on the
real Redis; the store is PostgreSQL. ONE worker, not one per queue: Celery's event loop (kombu's
``Hub``) is process-global (``kombu.asynchronous.get_event_loop``), so a second ``start_worker`` in
the same process reuses the first one's hub and the two consumers drive one non-thread-safe epoll
loop from two threads (lost broker connections, "dictionary changed size during iteration", and
the first worker to stop closes the loop under the other). Two workers need two processes.

Two clocks send a tick for every simulated minute (the settings clock is advanced by the test, so
ten minutes take seconds). Each fleet task records its real executions in Redis; the test checks
them against fires computed here by plain arithmetic.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from alma_schedule.beat.importer import apply_import, plan_import
from alma_schedule.celery import install
from alma_schedule.clock import send_tick
from alma_schedule.model import RoutineSpec, RunRecord, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.runners.task import TaskRunner, task_id_for
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store
from tests.beat import fleet_app
from tests.celery.celery_support import make_settings, wait_for

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]

SCOPE = Scope("acme", "ops")
MINUTE = timedelta(minutes=1)
ADD, PING, BOOM = "add-every-2-min", "ping-every-3-min", "boom-every-5-min"
TRACKED = (ADD, BOOM)


@contextlib.contextmanager
def threads_worker(app: Any, queues: list[str], hostname: str) -> Iterator[Any]:
    """A real worker in this process (threads pool, 4 threads) consuming ``queues``: the only one
    in this process (two would share kombu's process-global event loop, see the module docstring).

    Four threads: the two clocks' ticks can run at once (the claim race this test is about) with
    run tasks or fleet tasks beside them; no task waits on another, so none can starve the pool.
    The threads pool, unlike solo, sends no ``worker_process_init`` in this process, so the
    composition keeps its store (``after_fork`` is for forked children). ``start_worker`` makes
    the app current and default; both are restored afterwards.
    """
    from celery import _state
    from celery.contrib.testing.worker import start_worker

    previous_default, previous_current = _state.default_app, _state._tls.current_app
    try:
        with start_worker(
            app,
            pool="threads",
            concurrency=4,
            perform_ping_check=False,
            queues=queues,
            hostname=hostname,
            loglevel="WARNING",
            shutdown_timeout=30,
        ) as worker:
            yield worker
    finally:
        _state.default_app, _state._tls.current_app = previous_default, previous_current


def start_instant() -> datetime:
    """The first 10-minute boundary of the real clock more than 2 minutes ahead: simulated time
    never lags real time (the setup before minute 0, slow on a loaded machine, stays well inside
    the lead), so no message (whose expiry is in simulated time, checked by Celery against real
    time) is discarded as expired by the worker."""
    soon = (datetime.now(UTC) + timedelta(minutes=2)).replace(second=0, microsecond=0)
    return soon + timedelta(minutes=10 - soon.minute % 10)


def expected_fires(t0: datetime, minutes: int) -> dict[str, list[datetime]]:
    """Independent of the core: crontab */2 and */5 on UTC minutes (t0 is a 10-minute boundary,
    a fire at registration included); the 3-minute interval anchored on registration (k >= 1)."""
    span = [t0 + k * MINUTE for k in range(minutes + 1)]
    return {
        ADD: [t for t in span if t.minute % 2 == 0],
        BOOM: [t for t in span if t.minute % 5 == 0],
        PING: [t0 + k * 3 * MINUTE for k in range(1, minutes // 3 + 1)],
    }


def two_clocks(settings: Settings, at: datetime) -> list[str]:
    """Two clocks, each in its own thread, send a tick for the same instant; their task ids."""
    ids: list[str] = []

    def clock() -> None:
        ids.append(send_tick(settings, at))

    threads = [threading.Thread(target=clock) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ids


def ran(r: redis.Redis) -> list[str]:
    return [x.decode() for x in r.lrange("fleet:ran", 0, -1)]


@pytest.fixture
def rdb(redis_url: str) -> Iterator[redis.Redis]:
    r = redis.Redis.from_url(redis_url)
    try:
        yield r
    finally:
        r.close()


def test_an_imported_beat_schedule_runs_each_fleet_task_once_per_fire(
    pg_url: str, redis_url: str, rdb: redis.Redis
) -> None:
    migrate_store(pg_url)
    t0 = start_instant()
    clock = SettableTime(t0)
    settings = make_settings(pg_url, redis_url, clock=clock)
    fleet = fleet_app.e2e_app(redis_url, redis_url, redis_url)
    registry = KindRegistry(
        settings, builtins=False, use_entry_points=False, factories={"task": lambda s: TaskRunner(fleet)}
    )
    composition = install(fleet, settings=settings, registry=registry)
    schedule = composition.schedule()
    store = composition.store()
    try:
        # import the beat schedule, then track two of the three (a definition change: cursor kept)
        plan = plan_import(fleet, SCOPE)
        assert [c.name for c in plan.converted] == [ADD, PING, BOOM]
        assert {a.outcome for a in apply_import(schedule, plan, now=t0)} == {"created"}
        for conv in plan.converted:
            if conv.name in TRACKED:
                assert conv.spec is not None
                tracked = {**conv.spec.definition, "track": True, "deadline": "90s"}
                spec = RoutineSpec(SCOPE.org, SCOPE.uid, conv.name, "task", conv.spec.schedule, tracked)
                assert schedule.register(spec, now=t0).changed

        def runs() -> list[RunRecord]:
            return store.list_runs(SCOPE, limit=1000)

        def quiet() -> bool:
            rows = runs()
            if any(r.state in ("claimed", "running", "collecting") for r in rows):
                return False
            sent = sum(1 for r in rows if r.reason == "sent" or r.target_task_id is not None)
            if len(ran(rdb)) != sent:  # every task sent has really executed on the fleet worker
                return False
            return all(r.state != "submitted" or r.poll_attempts == 0 for r in rows)  # polled -> done

        expected = expected_fires(t0, 10)
        due_at: dict[datetime, int] = {}
        for fires in expected.values():
            for f in fires:
                due_at[f] = due_at.get(f, 0) + 1
        queues = ["alma.tick", "alma.run", "alma.collect", "celery"]
        with threads_worker(fleet, queues, "fleet@e2e"):
            for k in range(12):  # minutes 0..10 fire; minute 11 only collects the last tracked runs
                at = t0 + k * MINUTE
                clock.set(at)
                if k == 11:
                    for name in (ADD, PING, BOOM):
                        schedule.pause(SCOPE, name, "e2e-over", now=at)
                ids = two_clocks(settings, at)
                reports = [fleet.AsyncResult(i).get(timeout=60) for i in ids]
                assert len(reports) == 2
                assert sum(r["claimed"] for r in reports) == due_at.get(at, 0), (k, reports)
                assert all(r["errors"] == 0 for r in reports)
                wait_for(quiet, timeout=60, what=f"minute {k} settled")

        rows = runs()
        executions = ran(rdb)
        assert len(executions) == len(set(executions)), "no fleet task ran twice"
        for name, fires in expected.items():
            mine = sorted((r for r in rows if r.routine_id == name), key=lambda r: r.fire_at)
            assert [r.fire_at for r in mine] == fires, name
            task = {ADD: "fleet.add", PING: "fleet.ping", BOOM: "fleet.boom"}[name]
            ran_ids = sorted(x.split(":", 1)[1] for x in executions if x.startswith(task + ":"))
            assert ran_ids == sorted(task_id_for(r.key) for r in mine), name  # once per fire, that fire's id
            outcomes = {(r.state, r.reason, r.error_class) for r in mine}
            if name == ADD:
                assert outcomes == {("completed", "ok", None)}
                assert {r.target_task_id for r in mine} == set(ran_ids)
            elif name == BOOM:
                assert outcomes == {("failed", "task_failed", "FleetError")}
            else:
                assert outcomes == {("completed", "sent", None)}
        assert len(executions) == sum(len(f) for f in expected.values()) == 12
        streaks = {r.routine_id: r.consecutive_failures for r in store.list_routines(SCOPE)}
        assert streaks == {ADD: 0, PING: 0, BOOM: 3}
    finally:
        composition.close()
