"""What the importer tests share: the fleet app that knows the imported tasks, a scheduler on a
real store, and the routine ids a tick would claim at an instant."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from celery import Celery

from alma_schedule.engine import Scheduler, create_scheduler
from alma_schedule.model import Routine, Scope
from alma_schedule.runners.task import TaskRunner
from alma_schedule.settings import Settings
from alma_schedule.stores.sql import SqlStore, migrate_store

SCOPE = Scope("acme", "ops")


def fleet_app() -> Celery:
    """The fleet: ``proj.report`` and ``proj.cleanup``; ``in-code`` kept in its beat_schedule."""
    app = Celery("proj", set_as_current=False, broker="memory://")
    app.conf.beat_schedule = {"in-code": {"task": "proj.report", "schedule": 600.0}}

    @app.task(name="proj.report", shared=False)
    def report(*args: Any, **kwargs: Any) -> None:
        return None

    @app.task(name="proj.cleanup", shared=False)
    def cleanup(*args: Any, **kwargs: Any) -> None:
        return None

    return app


@contextmanager
def scheduler(url: str, app: Celery) -> Iterator[Scheduler]:
    """A scheduler on the (migrated) SQL store at ``url``, serving kind ``task`` with ``app``."""
    migrate_store(url)
    store = SqlStore(url)
    try:
        yield create_scheduler(store=store, runner=TaskRunner(app), settings=Settings())
    finally:
        store.close()


def due_ids(schedule: Scheduler, at: datetime) -> set[str]:
    """The routines a tick at ``at`` would claim."""
    return {p.routine_id for p in schedule.plan(now=at).due}


def routines(schedule: Scheduler) -> dict[str, Routine]:
    return {r.routine_id: r for r in schedule.store.list_routines(SCOPE)}


def whole(at: datetime) -> datetime:
    return at.replace(microsecond=0)


SECOND = timedelta(seconds=1)
