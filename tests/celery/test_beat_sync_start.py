"""The beat sync at beat's start, in-process through Celery's real ``beat.Service`` and ``beat_init``:
the convertible entries leave beat at once, the store answering or not; a sync that failed is retried
at the next wake-up; a bad ``alma_beat_sync_scope`` stops beat in one line naming it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery, beat
from celery.schedules import crontab, solar
from celery.signals import beat_init

from alma_schedule.celery import install
from alma_schedule.model import TICK_TASK, Scope
from alma_schedule.settings import Settings
from alma_schedule.stores import open_store
from alma_schedule.stores.sql import migrate_store

ENTRIES: dict[str, Any] = {
    "nightly": {"task": "fleet.ping", "schedule": crontab(minute=0, hour=2)},
    "often": {"task": "fleet.ping", "schedule": timedelta(seconds=30)},
    "lights": {"task": "fleet.ping", "schedule": solar("sunset", 90, 0)},
}


def fleet(url: str, **changes: Any) -> Celery:
    app = Celery("fleet", broker="memory://", set_as_current=False)
    app.conf.update(beat_schedule=dict(ENTRIES), timezone="UTC")

    @app.task(name="fleet.ping", shared=False)
    def ping() -> str:
        return "pong"

    install(app, settings=Settings(database_url=url, tick_period=timedelta(seconds=10), **changes), beat_clock=True)
    return app


@pytest.fixture
def services() -> Iterator[list[beat.Service]]:
    made: list[beat.Service] = []
    yield made
    for svc in made:
        if "scheduler" in svc.__dict__:
            with contextlib.suppress(Exception):
                svc.scheduler.close()


def start(app: Celery, tmp_path: Path, made: list[beat.Service]) -> beat.Service:
    svc = beat.Service(app=app, schedule_filename=str(tmp_path / f"beat-{len(made)}"))
    made.append(svc)
    beat_init.send(sender=svc)
    return svc


def routine_ids(url: str) -> list[str]:
    store = open_store(url)
    try:
        return [r.routine_id for r in store.list_routines(Scope("beat", "fleet"))]
    finally:
        store.close()


def test_the_entries_leave_beat_and_become_routines(tmp_path: Path, services: list[beat.Service]) -> None:
    url = f"sqlite:///{tmp_path}/s.sqlite3"
    migrate_store(url)
    svc = start(fleet(url), tmp_path, services)
    assert set(svc.scheduler.schedule) == {TICK_TASK, "lights", "celery.backend_cleanup"}
    assert routine_ids(url) == ["nightly", "often"]


def test_with_the_store_down_beat_starts_without_them_and_syncs_at_a_later_wake_up(
    tmp_path: Path, services: list[beat.Service], caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path}/s.sqlite3"  # not migrated yet: the store cannot answer
    svc = start(fleet(url), tmp_path, services)
    assert set(svc.scheduler.schedule) == {TICK_TASK, "lights", "celery.backend_cleanup"}  # left beat all the same
    failed = [r.getMessage() for r in caplog.records if "not synced into beat/fleet" in r.getMessage()]
    assert len(failed) == 1 and "nightly, often" in failed[0]
    svc.scheduler.tick()  # a wake-up: still down, not logged again
    assert len([r for r in caplog.records if "not synced into" in r.getMessage()]) == 1
    migrate_store(url)
    svc.scheduler.tick()
    assert routine_ids(url) == ["nightly", "often"]
    (done,) = [r.getMessage() for r in caplog.records if "(the store answered)" in r.getMessage()]
    assert "2 create" in done
    svc.scheduler.tick()  # done: no further attempt, no further line
    assert len([r for r in caplog.records if "synced into beat/fleet" in r.getMessage()]) == 2


def test_a_bad_sync_scope_stops_beat_in_one_line(
    tmp_path: Path, services: list[beat.Service], caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(SystemExit):
        start(fleet(f"sqlite:///{tmp_path}/s.sqlite3", beat_sync_scope="beat"), tmp_path, services)
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "alma_beat_sync_scope" in error and "\n" not in error
    assert not (tmp_path / "s.sqlite3").exists()  # stopped before any store access
