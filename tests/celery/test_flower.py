"""A real Flower on 127.0.0.1 (basic auth) against the test Redis reads a tick back from its API, and
the runs a dispatch sent (their ``task-sent`` events grouped in one event message)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from celery_support import CELERY, Procs, alma_env, inprocess_worker, make_settings, reserved_port, utcnow, wait_for

from alma_schedule.celery import create_app
from alma_schedule.clock import send_tick
from alma_schedule.model import RUN_TASK, TICK_TASK, RunKey, RunRecord
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import CeleryDispatcher, composition_of

pytestmark = pytest.mark.redis


@pytest.fixture
def port() -> Iterator[int]:
    """Flower's port, held by this process until the test is over (see ``reserved_port``)."""
    with reserved_port() as held:
        yield held


def test_flower_shows_the_tick_with_its_report(sqlite_url: str, redis_url: str, tmp_path: Path, port: int) -> None:
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, redis_url, task_events=True)
    app = create_app(settings, registry=KindRegistry(settings, builtins=False, use_entry_points=False))
    procs = Procs(tmp_path)
    flower = procs.start(
        "flower",
        [
            CELERY,
            "-A",
            "alma_schedule.celery",
            "flower",
            "--address=127.0.0.1",
            f"--port={port}",
            "--basic-auth=alma:s3cret",
        ],
        alma_env(settings, tmp_path),
    )
    base = f"http://127.0.0.1:{port}"
    auth = ("alma", "s3cret")
    try:
        with httpx.Client(base_url=base, timeout=5) as client:

            def up() -> bool:
                assert flower.poll() is None, procs.log("flower")[-2000:]
                try:
                    return client.get("/healthcheck").status_code == 200
                except httpx.TransportError:
                    return False

            wait_for(up, 30, 0.2, "flower to listen")
            assert client.get("/api/tasks").status_code == 401
            assert client.get("/api/tasks", auth=("alma", "wrong")).status_code == 401
            assert client.get("/", auth=("alma", "wrong")).status_code == 401

            with inprocess_worker(app, ["alma.tick"], send_events=True):
                sent: list[str] = []

                def seen() -> dict[str, object] | None:
                    sent.append(send_tick(settings))  # Flower only sees events after it connected
                    tasks = client.get("/api/tasks", params={"limit": 50}, auth=auth).json()
                    for task_id in sent:
                        info = tasks.get(task_id)
                        if info and info.get("state") == "SUCCESS":
                            return info  # type: ignore[no-any-return]
                    return None

                info = wait_for(seen, 30, 0.5, "a tick in Flower")

            keys = [RunKey("acme", "u1", f"flower-{i}", "2026-03-01T12:00:00Z") for i in range(3)]
            when = utcnow() + timedelta(minutes=5)
            runs = [
                RunRecord(*k.args(), state="claimed", origin="schedule", config_revision="rev", fire_at=when,
                          claimed_at=when, state_at=when, expires_at=when)
                for k in keys
            ]  # fmt: skip
            CeleryDispatcher(app, settings).send_runs(runs)  # 3 task messages, their 3 events in ONE message

            def runs_sent() -> list[dict[str, object]] | None:
                tasks = client.get("/api/tasks", params={"taskname": RUN_TASK}, auth=auth).json()
                found = [t for t in tasks.values() if "flower-" in str(t.get("args"))]
                return found if len(found) == 3 else None

            shown = wait_for(runs_sent, 30, 0.5, "the dispatched runs in Flower")
            assert all(t["sent"] and t["state"] == "PENDING" for t in shown)
            assert sorted(str(t["args"]) for t in shown) == sorted(repr(k.args()) for k in keys)
        assert info["name"] == TICK_TASK
        assert info["received"] and info["started"] and info["succeeded"] and info["worker"]
        assert "'claimed': 0" in str(info["result"]) and "'blocked': 0" in str(info["result"])
    finally:
        procs.stop_all()
        composition_of(app).close()  # type: ignore[union-attr]
