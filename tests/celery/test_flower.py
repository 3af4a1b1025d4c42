"""A real Flower on 127.0.0.1 (basic auth) against the test Redis reads a tick back from its API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from celery_support import CELERY, Procs, alma_env, inprocess_worker, make_settings, reserved_port, wait_for

from alma_schedule.celery import create_app
from alma_schedule.clock import send_tick
from alma_schedule.model import TICK_TASK
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import composition_of

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
        [CELERY, "-A", "alma_schedule.celery", "flower", "--address=127.0.0.1", f"--port={port}",
         "--basic-auth=alma:s3cret"],
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
        assert info["name"] == TICK_TASK
        assert info["received"] and info["started"] and info["succeeded"] and info["worker"]
        assert "'claimed': 0" in str(info["result"]) and "'blocked': 0" in str(info["result"])
    finally:
        procs.stop_all()
        composition_of(app).close()  # type: ignore[union-attr]
