"""The receiver of Celery's loss reports (``tasks/loss_reports.py``), driven through Celery's own
``task_failure`` signal with the arguments the worker parent sends (``request.py``: ``on_failure``,
``on_timeout``), on a real SQLite store: it acts for our run tasks only, for ``WorkerLostError``
and ``TimeLimitExceeded`` only, and never raises (a store it cannot use is logged and counted).
The real reports from a killed prefork child are ``test_killed_runs.py``'s."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery, signals
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded, WorkerLostError
from celery_support import Recorder

from alma_schedule.celery import create_app
from alma_schedule.model import RUN_MANY_TASK, RUN_TASK, TICK_TASK, RoutineSpec, RunKey, Scope
from alma_schedule.policies.ownership import owner_of
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import composition_of
from alma_schedule.tasks.bootstep import prepare_worker
from alma_schedule.tasks.composition import Composition
from alma_schedule.tasks.loss_reports import COUNTS, connect_loss_reports

SCOPE = Scope("acme", "lost")


def _app(url: str) -> tuple[Celery, Composition]:
    settings = Settings(database_url=url, broker_url="memory://")
    plain = {"plain": lambda _s: Recorder()}
    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories=plain)
    app = create_app(settings, registry=registry)
    app.conf.accept_content = ["json"]
    composition = composition_of(app)
    assert composition is not None
    return app, composition


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Celery, Composition]]:
    url = f"sqlite:///{tmp_path}/lost.sqlite3"
    migrate_store(url)
    app, composition = _app(url)
    assert connect_loss_reports(composition)
    try:
        yield app, composition
    finally:
        composition.close()


def _running(composition: Composition, routine_id: str, owner: str) -> RunKey:
    now = datetime.now(UTC)
    schedule = composition.schedule()
    schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, "plain", {"every": "1h"}, {}), now=now)
    key = RunKey.of(SCOPE, routine_id, "manual:01J00000000000000000000000")
    later = now + timedelta(hours=1)
    assert schedule.store.claim_manual(key, now=now, expires_at=later, resend_at=later).won
    assert schedule.store.start(key, now=now, owner=owner).won
    return key


def _report(sender: Any, task_id: str, exc: BaseException) -> None:
    """What the worker parent sends (``Request.on_failure`` / ``on_timeout``)."""
    signals.task_failure.send(
        sender=sender, task_id=task_id, exception=exc, args=[], kwargs={}, traceback=None, einfo=None
    )


def _why(composition: Composition, key: RunKey) -> str | None:
    rec = composition.store().get(key)
    assert rec is not None and rec.state == "running"
    return rec.blocked_why


def test_our_run_tasks_lost_or_past_the_hard_limit_are_marked(world: tuple[Celery, Composition]) -> None:
    app, composition = world
    single = _running(composition, "single", "req-1")
    packed_key = RunKey.of(SCOPE, "packed", "manual:01J00000000000000000000000")
    packed = _running(composition, "packed", owner_of("req-2", packed_key))
    before = COUNTS["reports"]
    _report(app.tasks[RUN_TASK], "req-1", WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL)."))
    _report(app.tasks[RUN_MANY_TASK], "req-2", TimeLimitExceeded(31.0))
    assert (_why(composition, single), _why(composition, packed)) == ("worker_lost", "time_limit")
    assert COUNTS["reports"] == before + 2


def test_anything_else_is_left_alone(world: tuple[Celery, Composition]) -> None:
    app, composition = world
    key = _running(composition, "r1", "req-1")
    other = Celery("fleet", set_as_current=False)

    @other.task(name=RUN_TASK, shared=False)
    def impostor() -> None:  # a fleet task of the same name, on another app
        return None

    _report(other.tasks[RUN_TASK], "req-1", WorkerLostError())
    _report(app.tasks[TICK_TASK], "req-1", WorkerLostError())  # ours, but not a run task
    _report(app.tasks[RUN_TASK], "req-1", ValueError("a task that failed in its child"))
    _report(app.tasks[RUN_TASK], "req-1", SoftTimeLimitExceeded())
    _report(app.tasks[RUN_TASK], "", WorkerLostError())
    assert _why(composition, key) is None


def test_a_store_it_cannot_use_is_logged_and_counted_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app, composition = _app(f"sqlite:///{tmp_path}/never-migrated.sqlite3")
    try:
        assert connect_loss_reports(composition) and not connect_loss_reports(composition)  # once per app
        errors = COUNTS["errors"]
        with caplog.at_level(logging.ERROR, logger="alma_schedule.tasks.loss_reports"):
            _report(app.tasks[RUN_TASK], "req-1", WorkerLostError())
        assert COUNTS["errors"] == errors + 1
        assert "loss report for" in caplog.text and "not applied: SchemaMismatch" in caplog.text
    finally:
        composition.close()


def test_the_bootstep_connects_it_only_for_a_worker_of_the_run_queue(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/boot.sqlite3"
    migrate_store(url)
    for queues, connected in (({"alma.tick"}, False), ({"alma.collect"}, False), ({"alma.run"}, True)):
        _, composition = _app(url)
        try:
            prepare_worker(composition, queues)
            assert connect_loss_reports(composition) is not connected  # False: the bootstep already did
        finally:
            composition.close()
