"""Killed runs are seen at once and never re-run (issue 14), with subprocess workers (prefork) on
the real Redis and PostgreSQL.

A pool CHILD is SIGKILLed mid-run (its worker parent lives): the parent's ``task_failure``
(``WorkerLostError``) reaches our receiver, which acts on the runs the request owns:

* an UNTRACKED ``task`` run (held by the fleet's own ``before_task_publish`` hook, before its one
  send) ends ``failed(worker_lost)``; the routine's next fire runs, once (one message on the
  fleet's queue: the lost fire was never sent, never re-run);
* a TRACKED ``task`` run, still ``running`` (held by the fleet's ``import_modules`` hook, before
  its submit), and a slow run of another kind are blocked AT ONCE, why ``worker_lost``, and stay
  ``running``: the next fire is ``skipped(overlap)``, nothing re-runs;
* a runner stuck past the soft limit is killed at the hard limit: blocked at once, why
  ``time_limit``.

The SIGKILLed PARENT case (nothing reported) is ``test_e2e_workers.py``'s mid-run kill.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery_support import Procs, alma_env, make_settings, utcnow, wait_for, wait_worker_ready
from e2e_runners import count_factory, create_effects_table

from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.model import RoutineSpec, RunKey, RunRecord, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.runners.task import TaskRunner
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.tasks import CeleryDispatcher

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme", "killed")


@dataclass
class World:
    settings: Settings
    schedule: Scheduler
    procs: Procs
    tmp_path: Path
    redis_url: str

    def env(self, **extra: str) -> dict[str, str]:
        return alma_env(
            self.settings,
            self.tmp_path,
            ALMA_CELERY_APP="killed_fleet:app",
            KILLED_FLEET_BROKER=self.redis_url,
            **extra,
        )

    def get(self, key: RunKey) -> RunRecord:
        rec = self.schedule.store.get(key)
        assert rec is not None
        return rec

    def worker(self, name: str, **extra: str) -> int:
        """A prefork worker with ONE pool child on the run queue; returns the child's pid."""
        proc = self.procs.worker(name, self.env(**extra), "alma.run", 1)
        wait_worker_ready(self.procs, name, 120)
        return wait_for(lambda: children(proc.pid), 90, what=f"the pool child of {name}")[0]

    def fleet_messages(self) -> int:
        client = redis.Redis.from_url(self.redis_url)
        try:
            return int(client.llen("celery"))
        finally:
            client.close()


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


@pytest.fixture
def world(pg_url: str, redis_url: str, tmp_path: Path) -> Iterator[World]:
    import killed_fleet

    killed_fleet.app.conf.update(broker_url=redis_url, result_backend=redis_url)
    migrate_store(pg_url)
    create_effects_table(pg_url)
    settings = make_settings(pg_url, redis_url)
    factories: dict[str, Any] = {"count": count_factory, "task": lambda _s: TaskRunner(killed_fleet.app)}
    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories=factories)
    from alma_schedule.celery import create_app

    app = create_app(settings, registry=registry)
    store = open_store(pg_url)
    schedule = create_schedule(
        store=store, runner=registry.resolve, dispatcher=CeleryDispatcher(app, settings), settings=settings
    )
    procs = Procs(tmp_path)
    try:
        yield World(settings, schedule, procs, tmp_path, redis_url)
    finally:
        procs.stop_all()
        store.close()


def register(world: World, routine_id: str, kind: str, definition: dict[str, Any], every: str = "1h") -> None:
    """A routine whose first fire is due now (registered one period and a second ago)."""
    seconds = int(every[:-1]) * (3600 if every.endswith("h") else 1)
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, kind, {"every": every}, definition)
    world.schedule.register(spec, now=utcnow() - timedelta(seconds=seconds + 1))


def one_claimed(world: World, routine_id: str) -> RunKey:
    (key,) = [k for k in world.schedule.tick().claimed if k.routine_id == routine_id]
    return key


def kill_mid_run(world: World, child: int, key: RunKey, ready: Any) -> None:
    """Wait until the run is ``running`` and ``ready()``; SIGKILL the pool child (not its parent)."""
    wait_for(lambda: world.get(key).state == "running" and ready(), 90, 0.05, "the run to be mid-run")
    os.kill(child, signal.SIGKILL)


def test_an_untracked_task_run_whose_child_is_killed_fails_worker_lost_and_the_next_fire_runs_once(
    world: World,
) -> None:
    marker = world.tmp_path / "hold-send"
    marker.write_text("x")
    register(world, "send", "task", {"task": "killed_fleet.ping"}, every="20s")
    child = world.worker("w1", KILLED_HANG_SEND=str(marker))
    key = one_claimed(world, "send")
    kill_mid_run(world, child, key, lambda: not marker.exists())  # the child sits in the send hook

    lost = wait_for(lambda: world.get(key).state != "running" and world.get(key), 90, what="the loss report")
    assert (lost.state, lost.reason, lost.error_class) == ("failed", "worker_lost", "WorkerLostError")
    assert lost.owner is not None and lost.owner == lost.owner.strip() and "/" not in lost.owner  # a request id
    assert world.schedule.get(SCOPE, "send").consecutive_failures == 0  # no verdict on the routine
    assert world.fleet_messages() == 0  # the lost fire never sent

    def next_fire() -> RunKey | None:
        claimed = [k for k in world.schedule.tick().claimed if k.routine_id == "send"]
        return claimed[0] if claimed else None

    nxt = wait_for(next_fire, 90, 0.5, "the next fire to be claimed")
    assert nxt != key
    done = wait_for(lambda: world.get(nxt).state == "completed" and world.get(nxt), 90, what="the next fire")
    assert done.reason == "sent"
    assert world.fleet_messages() == 1  # the next fire sent once; the lost one never re-run
    assert world.get(key).state == "failed"
    assert "loss report" in world.procs.log("w1")


@pytest.mark.parametrize("which", ["tracked", "slow"])
def test_a_tracked_or_slow_run_whose_child_is_killed_is_blocked_at_once_and_stays_running(
    world: World, which: str
) -> None:
    marker = world.tmp_path / "hold-import"
    marker.write_text("x")
    if which == "tracked":
        register(world, which, "task", {"task": "killed_fleet.ping", "track": True, "deadline": "1h"}, every="20s")
    else:
        register(world, which, "count", {"sleep": 120}, every="20s")
    child = world.worker("w1", KILLED_HANG_IMPORT=str(marker))
    key = one_claimed(world, which)
    if which == "tracked":
        kill_mid_run(world, child, key, lambda: not marker.exists())  # in the import hook: before its submit
    else:
        effects = world.schedule.store  # the count runner wrote its row: it is sleeping now
        kill_mid_run(world, child, key, lambda: effects.get(key) is not None and count_rows(world) == 1)

    blocked = wait_for(lambda: world.get(key).blocked_why and world.get(key), 90, what="the loss report")
    assert (blocked.state, blocked.blocked_why, blocked.reason) == ("running", "worker_lost", None)
    assert blocked.target_task_id is None and world.fleet_messages() == 0  # never submitted, never sent
    report = world.schedule.tick()  # at once: no 2 x run_time_limit wait
    assert key in report.blocked and report.blocked_why[report.blocked.index(key)] == "worker_lost"
    assert key in [r.key for r in world.schedule.store.blocked(utcnow(), world.settings.run_time_limit)]

    def overlapped() -> bool:
        return any(k.routine_id == which for k in world.schedule.tick().skipped)

    wait_for(overlapped, 90, 0.5, "the next fire to be skipped(overlap)")
    assert world.get(key).state == "running"  # until the operator's record; nothing re-ran it
    assert count_rows(world) == (1 if which == "slow" else 0)


def count_rows(world: World) -> int:
    import psycopg
    from e2e_runners import libpq_url

    with psycopg.connect(libpq_url(world.settings.database_url)) as conn:
        row = conn.execute("SELECT count(*) FROM e2e_effects").fetchone()
    assert row is not None
    return int(row[0])


def test_a_run_killed_at_the_hard_time_limit_is_blocked_at_once_why_time_limit(world: World) -> None:
    register(world, "stuck", "count", {"sleep": 300, "ignore_soft": True})
    world.worker("w1", ALMA_RUN_TIME_LIMIT="1s")  # hard limit: 1 s + 30 s
    key = one_claimed(world, "stuck")
    wait_for(lambda: count_rows(world) == 1, 90, what="the stuck run to start")
    blocked = wait_for(lambda: world.get(key).blocked_why and world.get(key), 90, 0.2, "the hard limit's report")
    assert (blocked.state, blocked.blocked_why) == ("running", "time_limit")
    assert key in world.schedule.tick().blocked
    assert count_rows(world) == 1
