"""When nothing has consumed alma.run for ALMA_HEARTBEAT_MAX_AGE (a run sent and due that long ago that no
worker started), ``plan``, the tick report and ``GET /healthz`` say so in one line. Real PostgreSQL and
Redis, no worker serving alma.run; the instants are given (``plan --at``, a settable clock)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from celery_support import make_settings, utcnow, wait_for
from fleet_project import alma, clean_env
from starlette.testclient import TestClient

from alma_schedule.http import create_http_app
from alma_schedule.settings import Secret
from alma_schedule.stores import open_store

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

TURN = ["--kind", "turn", "--schedule", '{"every": "1h"}', "--definition", '{"goal": "g"}']
SAID = "nothing has consumed alma.run for ALMA_HEARTBEAT_MAX_AGE"


def test_plan_tick_and_healthz_say_nothing_consumed_the_run_queue(tmp_path: Path, pg_url: str, redis_url: str) -> None:
    env = clean_env(ALMA_DATABASE_URL=pg_url, ALMA_BROKER_URL=redis_url, ALMA_PROVIDER="scripted", ALMA_SINK="stdout")
    for args in (["migrate"], ["routines", "add", "acme/ops", "r", *TURN], ["routines", "trigger", "acme/ops", "r"]):
        done = alma(tmp_path, *args, env=env)
        assert done.returncode == 0, (args, done.stderr)
    now = utcnow()
    fresh = json.loads(alma(tmp_path, "plan", "--json", env=env).stdout)
    assert fresh["run_queue"] is None  # sent just now: not late yet
    later = (now + timedelta(minutes=10)).isoformat()
    planned = json.loads(alma(tmp_path, "plan", "--at", later, "--json", env=env).stdout)
    assert planned["run_queue"].startswith(f"{SAID} (300s): run acme/ops/r/"), planned["run_queue"]
    text = alma(tmp_path, "plan", "--at", later, env=env).stdout.splitlines()
    assert [line for line in text if SAID in line] == [f"warning: {planned['run_queue']}"]

    quick = {**env, "ALMA_HEARTBEAT_MAX_AGE": "1s"}  # the tick runs at the real clock: poll until 1 s has passed

    def ticked() -> str | None:
        report = json.loads(alma(tmp_path, "tick", "--in-process", "--json", env=quick).stdout)
        return report["run_queue"]  # type: ignore[no-any-return]

    line = wait_for(ticked, 60, 0.5, "the tick report says nothing consumed alma.run")
    assert line.startswith(f"{SAID} (1s): run acme/ops/r/")

    clock = {"now": now}  # set below to the run's own send
    settings = make_settings(
        pg_url, redis_url, http_secret=Secret("a-secret-of-24-bytes-long"), clock=lambda: clock["now"]
    )
    store = open_store(pg_url)
    try:
        (sent,) = store.unstarted(now + timedelta(hours=1), timedelta(0), 5)  # the instants count from its send
        now = sent.state_at
        clock["now"] = now
        store.heartbeat(now)
        with TestClient(create_http_app(settings, store=store)) as client:
            assert "run_queue" not in client.get("/healthz").json()
            clock["now"] = now + timedelta(minutes=4, seconds=59)
            store.heartbeat(clock["now"])
            assert "run_queue" not in client.get("/healthz").json()
            clock["now"] = now + timedelta(minutes=6)
            store.heartbeat(clock["now"])
            health = client.get("/healthz")
            assert health.status_code == 200, health.text  # the ticks run: said, not failed
            said = health.json()["run_queue"]
            assert said.startswith(f"{SAID} (300s); start a worker that serves alma.run"), said
            assert "acme" not in said  # the open probe names no run
    finally:
        store.close()
