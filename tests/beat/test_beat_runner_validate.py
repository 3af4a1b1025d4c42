"""The task runner refuses at registration what a tick could not send or track, with the reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from alma_schedule.engine import create_schedule
from alma_schedule.errors import ConfigurationError, InvalidInput, RegistrationRefused
from alma_schedule.model import RoutineSpec, RunKey
from alma_schedule.runners.task import TaskDefinition, TaskRunner, from_settings, task_id_for
from alma_schedule.settings import Settings
from alma_schedule.stores.memory import MemoryStore
from tests.beat import fleet_app

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
BACKEND = "redis://127.0.0.1:6379/15"  # never contacted: only the backend's kind matters here


def _register(app: Any, definition: dict[str, Any], routine_id: str = "r") -> Any:
    schedule = create_schedule(store=MemoryStore(), runner=TaskRunner(app), settings=Settings(clock=lambda: T0))
    spec = RoutineSpec("acme", "ops", routine_id, "task", {"every": "5m"}, definition)
    return schedule.register(spec, now=T0)


def _refusal(app: Any, definition: dict[str, Any]) -> str:
    with pytest.raises(RegistrationRefused) as info:
        _register(app, definition)
    return info.value.reason


def test_a_valid_untracked_definition_registers() -> None:
    app = fleet_app.make_worker_app("memory://", None)
    receipt = _register(app, {"task": "fleet.add", "args": [1, 2], "options": {"queue": "q", "priority": 3}})
    assert receipt.changed is True
    assert receipt.routine.kind == "task"
    again = _register(app, {"task": "fleet.add"})
    assert again.routine.definition == {"task": "fleet.add"}


@pytest.mark.parametrize(
    ("definition", "words"),
    [
        ({"task": "fleet.nope"}, ["'fleet.nope'", "not registered"]),
        ({"args": []}, ["'task'"]),
        ({"task": "fleet.add", "args": [{1, 2}]}, ["JSON"]),
        ({"task": "fleet.add", "kwargs": {"when": object()}}, ["JSON"]),
        ({"task": "fleet.add", "args": "1,2"}, ["'args' must be a list"]),
        ({"task": "fleet.add", "options": {"countdown": 5}}, ["'countdown'", "queue, priority, expires"]),
        ({"task": "fleet.add", "options": {"priority": 999}}, ["priority"]),
        ({"task": "fleet.add", "options": {"expires": -1}}, ["expires"]),
        ({"task": "fleet.add", "colour": "red"}, ["'colour'"]),
        ({"task": "fleet.add", "track": True}, ["deadline"]),
        ({"task": "fleet.add", "deadline": "1h"}, ["only to tracked"]),
        ({"task": "fleet.add", "track": "yes", "deadline": "1h"}, ["'track'"]),
        ({"task": "fleet.add", "track": True, "deadline": "soon"}, ["deadline"]),
    ],
)
def test_bad_definitions_are_refused_with_the_reason(definition: dict[str, Any], words: list[str]) -> None:
    app = fleet_app.make_worker_app("memory://", BACKEND)
    reason = _refusal(app, definition)
    for w in words:
        assert w in reason


def test_tracking_needs_a_stored_result_backend() -> None:
    no_backend = fleet_app.make_worker_app("memory://", None)
    reason = _refusal(no_backend, {"task": "fleet.add", "track": True, "deadline": "1h"})
    assert "no result backend" in reason
    rpc = fleet_app.make_worker_app("memory://", "rpc://")
    reason = _refusal(rpc, {"task": "fleet.add", "track": True, "deadline": "1h"})
    assert "rpc://" in reason
    # untracked needs no backend at all
    assert _register(no_backend, {"task": "fleet.add"}).changed


def test_tracking_a_task_that_ignores_results_is_refused() -> None:
    app = fleet_app.make_worker_app("memory://", BACKEND)
    reason = _refusal(app, {"task": "fleet.quiet", "track": True, "deadline": "1h"})
    assert "ignore_result" in reason
    app_wide = fleet_app.make_worker_app("memory://", BACKEND, task_ignore_result=True)
    assert "ignore_result" in _refusal(app_wide, {"task": "fleet.add", "track": True, "deadline": "1h"})


def test_a_deadline_longer_than_result_expires_is_refused() -> None:
    app = fleet_app.make_worker_app("memory://", BACKEND, result_expires=3600)
    assert "result_expires" in _refusal(app, {"task": "fleet.add", "track": True, "deadline": "2h"})
    ok = _register(app, {"task": "fleet.add", "track": True, "deadline": "30m"})
    assert ok.routine.definition["deadline"] == "30m"


def test_definition_normalises() -> None:
    d = TaskDefinition.parse({"task": "t", "args": (1, (2, 3)), "track": True, "deadline": 7200})
    assert d.to_json() == {"task": "t", "args": [1, [2, 3]], "track": True, "deadline": "2h"}
    with pytest.raises(InvalidInput):
        TaskDefinition.parse({"task": " t"})


def test_task_ids_are_derived_from_the_run_key() -> None:
    a = task_id_for(RunKey("acme", "ops", "r", "20260302T090000Z"))
    assert a == task_id_for(RunKey("acme", "ops", "r", "20260302T090000Z"))
    assert a != task_id_for(RunKey("acme", "ops", "r", "20260302T090500Z"))
    assert a != task_id_for(RunKey("acme", "ops2", "r", "20260302T090000Z"))


def test_from_settings_needs_alma_celery_app() -> None:
    with pytest.raises(ConfigurationError, match="ALMA_CELERY_APP"):
        from_settings(Settings())
    runner = from_settings(Settings(celery_app="tests.beat.fleet_app:app"))
    assert runner.app is fleet_app.app
    assert "fleet.add" in runner.tasks()
    with pytest.raises(ConfigurationError, match="ALMA_CELERY_APP"):
        from_settings(Settings(celery_app="tests.beat.no_such_module:app"))
    with pytest.raises(ConfigurationError, match="not a Celery app"):
        from_settings(Settings(celery_app="tests.beat.fleet_app:BEAT_SCHEDULE"))


def test_the_kind_registry_serves_task_from_settings() -> None:
    from alma_schedule.runners.registry import KindRegistry

    registry = KindRegistry(Settings(celery_app="tests.beat.fleet_app:app"), use_entry_points=False)
    assert isinstance(registry.runner("task"), TaskRunner)
    bare = KindRegistry(Settings(), use_entry_points=False)
    with pytest.raises(ConfigurationError, match="ALMA_CELERY_APP"):
        bare.check(["task"])
