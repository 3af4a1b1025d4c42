"""``clock run``: by default the clock wakes at the next due instant (the hint read fresh from the
store at each wake-up); ``--every`` keeps a fixed cadence. Real processes against a real SQLite store
and a real Redis (no worker: the ticks stay in the queue, where the test reads them).

The decisions themselves are tests/policies/test_policy_wake.py's (pure)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import redis
from celery_support import ALMA, utcnow, wait_for
from test_dispatcher import messages

from alma_schedule.stores import open_store
from alma_schedule.testing.builders import make_routine


def _env(redis_url: str, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env.update(ALMA_BROKER_URL=redis_url, ALMA_DATABASE_URL=database_url)
    return env


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def _run(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [ALMA, "clock", "run", *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


@pytest.mark.redis
def test_clock_run_wakes_at_a_routine_registered_while_it_sleeps(
    migrated_sqlite_url: str, redis_url: str, r: redis.Redis
) -> None:
    """Nothing is due at start; a routine registered afterwards (no tick ran: the stored hint knows
    nothing of it) is seen at the next poll and ticked for at its instant, not at the 1 h heartbeat."""
    proc = _run([], _env(redis_url, migrated_sqlite_url) | {"ALMA_TICK_PERIOD": "1h"})
    try:
        wait_for(lambda: r.llen("alma.tick") >= 1, 30, what="the start tick")
        store = open_store(migrated_sqlite_url)
        wake = (utcnow() + timedelta(seconds=3)).replace(microsecond=0)
        store.put_routine(make_routine("soon", next_due_at=wake), now=utcnow())
        store.close()
        wait_for(lambda: r.llen("alma.tick") >= 2, 30, what="the tick woken for the new routine")
    finally:
        err = _stop(proc)
    ticks = messages(r, "alma.tick")
    assert len(ticks) == 2, err  # the start tick, then ONE for the routine (no worker: it stays due)
    start, woken = (datetime.fromisoformat(t["decoded"][1]["woken_for"]) for t in ticks)
    assert start < wake <= woken  # woken at (or after) its instant, never before
    assert all(t["headers"]["ignore_result"] is True for t in ticks)
    assert set(ticks[1]["decoded"][1]) == {"woken_for"}  # the worker claims at its own clock


@pytest.mark.redis
def test_clock_run_every_keeps_a_fixed_cadence_without_reading_the_store(tmp_path: Path, redis_url: str) -> None:
    env = _env(redis_url, f"sqlite:///{tmp_path}/never-migrated.sqlite3")
    client = redis.Redis.from_url(redis_url)
    proc = _run(["--every", "1h"], env)
    try:
        wait_for(lambda: client.llen("alma.tick") >= 1, 30, what="the start tick")
    finally:
        _stop(proc)
    (tick,) = messages(client, "alma.tick")
    assert tick["decoded"][1] == {}  # at start: the worker's clock; the next one in an hour
    client.close()


def test_every_and_follow_exclude_each_other(tmp_path: Path, redis_url: str) -> None:
    env = _env(redis_url, f"sqlite:///{tmp_path}/x.sqlite3")
    done = subprocess.run([ALMA, "clock", "run", "--every", "1m", "--follow"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "--every" in done.stderr, done.stderr


@pytest.mark.parametrize("argv", [[], ["--follow"]], ids=["default", "follow-alias"])
def test_clock_run_refuses_a_store_it_cannot_read_in_one_line(tmp_path: Path, redis_url: str, argv: list[str]) -> None:
    url = f"sqlite:///{tmp_path}/never-migrated.sqlite3"
    done = subprocess.run(
        [ALMA, "clock", "run", *argv], env=_env(redis_url, url), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "alma-schedule migrate" in done.stderr, done.stderr
