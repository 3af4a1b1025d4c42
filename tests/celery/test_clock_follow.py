"""``clock run --follow``: the clock also ticks at the wake-up hint the last tick stored.

:func:`next_send` decides when a clock sends next; the process test runs the real command against a
real SQLite store and a real Redis."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from celery_support import ALMA, utcnow, wait_for
from test_dispatcher import messages

from alma_schedule.clock import next_send
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.testing.builders import make_routine

NOW = datetime(2026, 3, 1, 12, 0, 10, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
BOUNDARY = datetime(2026, 3, 1, 12, 1, tzinfo=UTC)


def _settings() -> Settings:
    return Settings(clock=lambda: NOW)


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (NOW + timedelta(seconds=5), NOW + timedelta(seconds=5)),  # before the period: the hint
        (None, BOUNDARY),  # nothing due: the period
        (NOW, BOUNDARY),  # not after now: already due, the period's tick sees it
        (BOUNDARY + MINUTE, BOUNDARY),  # after the period: the period
    ],
)
def test_next_send_is_the_hint_when_it_comes_before_the_period(hint: datetime | None, expected: datetime) -> None:
    assert next_send(_settings(), MINUTE, lambda: hint) == expected
    assert next_send(_settings(), MINUTE) == BOUNDARY  # without --follow: always the period


def test_a_store_that_cannot_answer_costs_the_hint_only() -> None:
    def broken() -> datetime | None:
        raise ConnectionError("store away")

    assert next_send(_settings(), MINUTE, broken) == BOUNDARY


def _env(redis_url: str, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env.update(ALMA_BROKER_URL=redis_url, ALMA_DATABASE_URL=database_url)
    return env


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.mark.redis
def test_clock_run_follow_ticks_at_the_stored_hint(tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    url = f"sqlite:///{tmp_path}/follow.sqlite3"
    migrate_store(url)
    store = open_store(url)
    wake = (utcnow() + timedelta(seconds=4)).replace(microsecond=0)
    store.put_routine(make_routine("soon", next_due_at=wake), now=utcnow())
    assert store.heartbeat(utcnow()) == wake  # what the last tick stored
    store.close()
    proc = subprocess.Popen(
        [ALMA, "clock", "run", "--follow", "--every", "1h"],
        env=_env(redis_url, url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: r.llen("alma.tick") >= 2, 30, what="the start tick and the hinted one")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    ticks = messages(r, "alma.tick")
    assert ticks[0]["decoded"][1] == {}  # at start: the worker's clock
    assert ticks[1]["decoded"][1] == {"now": wake.isoformat()}  # then at the hint, not in an hour
    assert len(ticks) == 2


def test_clock_run_follow_refuses_a_store_it_cannot_read_in_one_line(tmp_path: Path, redis_url: str) -> None:
    url = f"sqlite:///{tmp_path}/never-migrated.sqlite3"
    done = subprocess.run(
        [ALMA, "clock", "run", "--follow"], env=_env(redis_url, url), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "alma-schedule migrate" in done.stderr, done.stderr
