"""The clocks: ``send_tick`` / ``run_clock`` through kombu, ``clock send`` and ``celery call`` from a
shell, and ``serve-http`` through a real uvicorn server and an httpx client."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from celery_support import ALMA, CELERY, bound_socket, make_settings, utcnow, wait_for
from test_dispatcher import messages

from alma_schedule.clock import next_boundary, run_clock, send_tick
from alma_schedule.errors import ConfigurationError
from alma_schedule.http import SECRET_HEADER, create_http_app
from alma_schedule.model import TICK_TASK
from alma_schedule.settings import Secret, Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.testing.builders import make_routine

pytestmark = pytest.mark.redis


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def test_send_tick_publishes_one_expiring_json_message_a_worker_understands(redis_url: str, r: redis.Redis) -> None:
    settings = Settings(broker_url=redis_url)
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    before = utcnow()
    task_id = send_tick(settings, at)
    (msg,) = messages(r, "alma.tick")
    headers = msg["headers"]
    assert msg["content-type"] == "application/json"
    assert headers["task"] == TICK_TASK and headers["id"] == task_id
    expires = datetime.fromisoformat(headers["expires"])
    assert before + settings.tick_expires <= expires <= utcnow() + settings.tick_expires
    assert msg["decoded"][:2] == [[], {"now": at.isoformat()}]
    send_tick(settings)  # no now: the worker's clock
    assert messages(r, "alma.tick")[1]["decoded"][1] == {}


def test_run_clock_sends_at_aligned_instants_until_stopped(redis_url: str, r: redis.Redis) -> None:
    settings = Settings(broker_url=redis_url)
    stop = threading.Event()
    sent: list[int] = []
    thread = threading.Thread(target=lambda: sent.append(run_clock(settings, timedelta(seconds=0.5), stop)))
    thread.start()
    try:
        wait_for(lambda: r.llen("alma.tick") >= 3, 10, what="three ticks")
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive() and sent[0] >= 3
    ticks = messages(r, "alma.tick")
    assert ticks[0]["decoded"][1] == {}  # the first one at start: the worker's clock
    instants = [datetime.fromisoformat(m["decoded"][1]["now"]) for m in ticks[1:]]
    assert all(t.microsecond in (0, 500000) for t in instants)  # multiples of 0.5 s
    for m in ticks:  # each expires within 0.9 * every
        sent_at = datetime.fromisoformat(m["headers"]["expires"]) - timedelta(seconds=0.45)
        assert sent_at <= utcnow()
    assert next_boundary(datetime(2026, 1, 1, 0, 0, 59, tzinfo=UTC), timedelta(minutes=1)) == datetime(
        2026, 1, 1, 0, 1, tzinfo=UTC
    )


def _env(redis_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env["ALMA_BROKER_URL"] = redis_url
    return env


def test_clock_send_and_the_crontab_line_from_a_shell(redis_url: str, r: redis.Redis) -> None:
    done = subprocess.run([ALMA, "clock", "send"], env=_env(redis_url), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    crontab = subprocess.run(
        [CELERY, "-A", "alma_schedule.celery", "call", TICK_TASK, "--expires", "55"],
        env=_env(redis_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert crontab.returncode == 0, crontab.stderr
    sent = messages(r, "alma.tick")
    assert [m["headers"]["id"] for m in sent] == [done.stdout.strip(), crontab.stdout.strip()]
    assert all(m["headers"]["task"] == TICK_TASK and m["headers"]["expires"] for m in sent)
    for argv in (["clock", "send", "--help"], ["clock", "run", "--help"], ["serve-http", "--help"]):
        shown = subprocess.run([ALMA, *argv], capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0 and "Example" in shown.stdout


def test_clock_run_every_keeps_its_cadence_and_the_derived_expiry(
    redis_url: str, r: redis.Redis, tmp_path: Any
) -> None:
    """``--every 2s`` with ALMA_TICK_PERIOD=2s and no ALMA_TICK_EXPIRES: ticks at multiples of 2 s, each
    expiring 1 s after its send (period - max(1s, period/12))."""
    env = {**_env(redis_url), "ALMA_TICK_PERIOD": "2s"}
    log = open(tmp_path / "clock.log", "wb")
    proc = subprocess.Popen([ALMA, "clock", "run", "--every", "2s"], env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    try:
        wait_for(lambda: r.llen("alma.tick") >= 3, 60, 0.1, "three ticks of a 2 s clock")
    finally:
        proc.terminate()
        proc.wait(20)
    ticks = messages(r, "alma.tick")
    instants = [datetime.fromisoformat(m["decoded"][1]["now"]) for m in ticks[1:]]
    assert all(t.microsecond == 0 and t.second % 2 == 0 for t in instants)
    assert instants[1] - instants[0] >= timedelta(seconds=2)
    for at, m in zip(instants, ticks[1:], strict=False):
        lead = datetime.fromisoformat(m["headers"]["expires"]) - at
        assert timedelta(seconds=1) <= lead < timedelta(seconds=2), lead  # sent at or after `at`, 1 s to live


# --------------------------------------------------------------------------- serve-http


class Server:
    """uvicorn serving the app on 127.0.0.1 in a thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        # the socket is bound here and handed to uvicorn: no other process can take the port between
        self.sock = bound_socket()
        self.port = int(self.sock.getsockname()[1])
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: self.server.run(sockets=[self.sock]), daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        wait_for(lambda: self.server.started, 10, what="uvicorn started")
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def test_serve_http_refuses_to_start_without_a_secret(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="ALMA_HTTP_SECRET"):
        create_http_app(Settings())
    env = {**_env("memory://"), "ALMA_DATABASE_URL": f"sqlite:///{tmp_path}/s.sqlite3"}  # a store: the secret is next
    done = subprocess.run([ALMA, "serve-http"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "ALMA_HTTP_SECRET" in done.stderr


def test_post_tick_and_healthz_through_a_real_server(sqlite_url: str, redis_url: str, r: redis.Redis) -> None:
    migrate_store(sqlite_url)
    clock = {"now": utcnow()}
    settings = make_settings(
        sqlite_url,
        redis_url,
        http_secret=Secret("s3cret-s3cret-s3cret"),
        http_max_body=64,
        heartbeat_max_age=timedelta(minutes=5),
        clock=lambda: clock["now"],
    )
    store = open_store(sqlite_url)
    try:
        with Server(create_http_app(settings)) as base, httpx.Client(base_url=base, timeout=10) as client:
            assert client.post("/tick").status_code == 401
            assert client.post("/tick", headers={SECRET_HEADER: "s3cret-s3cret-s3cret!"}).status_code == 401
            assert client.post("/tick", headers={SECRET_HEADER: "S3CRET-S3CRET-S3CRET"}).status_code == 401
            big = client.post("/tick", headers={SECRET_HEADER: "s3cret-s3cret-s3cret"}, content=b"x" * 65)
            assert big.status_code == 413
            assert r.llen("alma.tick") == 0  # nothing refused was enqueued

            ok = client.post("/tick", headers={SECRET_HEADER: "s3cret-s3cret-s3cret"})
            assert ok.status_code == 202 and ok.json()["next_wake_at"] is None  # no tick has stored a hint
            at = "2026-01-01T00:00:00+00:00"
            with_now = client.post(
                "/tick", headers={SECRET_HEADER: "s3cret-s3cret-s3cret"}, content=json.dumps({"now": at})
            )
            assert with_now.status_code == 202
            bad = client.post("/tick", headers={SECRET_HEADER: "s3cret-s3cret-s3cret"}, content=b'{"now": 5}')
            assert bad.status_code == 400
            sent = messages(r, "alma.tick")
            assert [m["headers"]["id"] for m in sent] == [ok.json()["task_id"], with_now.json()["task_id"]]
            assert sent[1]["decoded"][1] == {"now": at}

            assert client.get("/healthz").status_code == 503  # no tick has ever run
            store.heartbeat(clock["now"] - timedelta(minutes=1))
            healthy = client.get("/healthz")
            assert healthy.status_code == 200 and 59 <= healthy.json()["age_seconds"] <= 61
            clock["now"] += timedelta(minutes=10)  # the clock stopped ticking: the alarm
            stale = client.get("/healthz")
            assert stale.status_code == 503 and stale.json()["ok"] is False
            assert client.get("/tick").status_code == 405

            wake = clock["now"] + timedelta(minutes=3)
            store.put_routine(make_routine("wakes", next_due_at=wake), now=clock["now"])
            store.heartbeat(clock["now"])  # what the last tick stored is what POST /tick answers
            hinted = client.post("/tick", headers={SECRET_HEADER: "s3cret-s3cret-s3cret"})
            assert hinted.status_code == 202 and hinted.json()["next_wake_at"] == wake.isoformat()
    finally:
        store.close()
