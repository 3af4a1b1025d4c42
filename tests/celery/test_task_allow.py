"""A task routine names only the fleet's own tasks and queues (issue 14, defect 5): registration
refuses ours, Celery's built-ins, our queues and Celery's internal ones, and what ``task_allow`` /
``queue_allow`` leave out, in one line naming the task or queue and the setting; nothing is stored.

The app is a real Celery app with ``install(app)`` (so our tasks are registered in it, as in a fleet),
on the in-memory broker: registration sends nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from celery import Celery

from alma_schedule.beat.importer import plan_import
from alma_schedule.celery import install
from alma_schedule.engine import create_schedule
from alma_schedule.errors import AlmaScheduleError, RegistrationRefused
from alma_schedule.model import OUR_TASKS, RoutineSpec, Scope
from alma_schedule.policies.allow import TaskAllow
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.runners.task import TaskRunner
from alma_schedule.settings import Settings, load_settings
from alma_schedule.stores.memory import MemoryStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SCOPE = Scope("acme", "ops")
CELERY_BUILTINS = ["celery.map", "celery.starmap", "celery.chunks", "celery.group", "celery.chord", "celery.chain"]
BAD_QUEUES = [
    "alma.run",
    "alma.tick",
    "alma.collect",
    "alma.dead",
    "celeryev.5f3a",
    "worker1@host.celery.pidbox",
    "reply.celery.pidbox",
]


def fleet(**conf: Any) -> Celery:
    app = Celery("fleet", broker="memory://", set_as_current=False)
    app.conf.update(task_serializer="json", accept_content=["json"], **conf)

    @app.task(name="fleet.add", shared=False)
    def add(x: int = 1, y: int = 1) -> int:
        return x + y

    @app.task(name="fleet.ping", shared=False)
    def ping() -> str:
        return "pong"

    install(app, settings=Settings(clock=lambda: T0))
    return app


@pytest.fixture(scope="module")
def app() -> Celery:
    return fleet(task_routes={"fleet.ping": {"queue": "alma.run"}})


def _schedule(app: Celery, settings: Settings | None) -> tuple[Any, MemoryStore]:
    settings = settings or Settings(clock=lambda: T0)
    store = MemoryStore()
    runner = TaskRunner(app, allow=TaskAllow.from_settings(settings))
    return create_schedule(store=store, runner=runner, settings=settings), store


def _spec(definition: dict[str, Any]) -> RoutineSpec:
    return RoutineSpec(SCOPE.org, SCOPE.uid, "r", "task", {"every": "5m"}, definition)


def register(app: Celery, definition: dict[str, Any], settings: Settings | None = None) -> tuple[Any, MemoryStore]:
    schedule, store = _schedule(app, settings)
    return schedule.register(_spec(definition), now=T0), store


def refusal(app: Celery, definition: dict[str, Any], settings: Settings | None = None) -> str:
    """The one-line refusal of ``definition``; the store stays empty."""
    schedule, store = _schedule(app, settings)
    with pytest.raises(RegistrationRefused) as info:
        schedule.register(_spec(definition), now=T0)
    assert list(store.iter_routines()) == []  # nothing half-written
    line = str(info.value)
    assert "\n" not in line
    return line


@pytest.mark.parametrize("task", sorted(OUR_TASKS))
def test_our_own_tasks_are_refused(app: Celery, task: str) -> None:
    assert task in app.tasks  # registered in the fleet's app: only the allow-list stops it
    line = refusal(app, {"task": task, "args": ["acme", "other", "r1", "20260302T0900Z"]})
    assert f"task '{task}' is not allowed" in line and "ALMA_TASK_ALLOW" in line


@pytest.mark.parametrize("task", CELERY_BUILTINS)
def test_celerys_built_in_tasks_are_refused(app: Celery, task: str) -> None:
    app.loader.import_default_modules()
    assert task in app.tasks
    line = refusal(app, {"task": task})
    assert f"task '{task}' is not allowed" in line and "celery.* tasks" in line and "ALMA_TASK_ALLOW" in line


@pytest.mark.parametrize("queue", BAD_QUEUES)
def test_our_queues_and_celerys_internal_queues_are_refused(app: Celery, queue: str) -> None:
    line = refusal(app, {"task": "fleet.add", "options": {"queue": queue}})
    assert f"queue '{queue}' is not allowed" in line and "ALMA_QUEUE_ALLOW" in line


def test_our_queues_are_refused_under_the_names_they_are_configured_with(app: Celery) -> None:
    settings = Settings(clock=lambda: T0, run_queue="jobs.runs")
    line = refusal(app, {"task": "fleet.add", "options": {"queue": "jobs.runs"}}, settings)
    assert "queue 'jobs.runs' is not allowed" in line


def test_the_queue_the_apps_routing_picks_is_the_one_checked(app: Celery) -> None:
    line = refusal(app, {"task": "fleet.ping"})  # task_routes sends fleet.ping to alma.run
    assert "queue 'alma.run' is not allowed" in line
    receipt, store = register(app, {"task": "fleet.ping", "options": {"queue": "pings"}})  # an option wins
    assert receipt.changed and store.get_routine(SCOPE, "r") is not None


@pytest.mark.parametrize("queue", [None, "celery", "reports", "fleet.sync"])
def test_the_fleets_tasks_on_any_other_queue_register(app: Celery, queue: str | None) -> None:
    definition: dict[str, Any] = {"task": "fleet.add", "args": [1, 2]}
    if queue is not None:
        definition["options"] = {"queue": queue}  # None: the default celery queue
    receipt, _ = register(app, definition)
    assert receipt.changed


def test_task_allow_and_queue_allow_narrow_it_from_the_environment(app: Celery) -> None:
    settings = load_settings(
        environ={"ALMA_TASK_ALLOW": "fleet.a*,proj.*", "ALMA_QUEUE_ALLOW": "fleet.*, reports"}
    ).replace(clock=lambda: T0)
    receipt, _ = register(app, {"task": "fleet.add", "options": {"queue": "fleet.sync"}}, settings)
    assert receipt.changed
    line = refusal(app, {"task": "fleet.ping", "options": {"queue": "fleet.sync"}}, settings)
    assert line.endswith("task 'fleet.ping' is not allowed: it matches none of ALMA_TASK_ALLOW (fleet.a*, proj.*)")
    line = refusal(app, {"task": "fleet.add"}, settings)  # routed to the default celery queue
    assert line.endswith("queue 'celery' is not allowed: it matches none of ALMA_QUEUE_ALLOW (fleet.*, reports)")


def test_a_narrowing_never_widens(app: Celery) -> None:
    settings = Settings(clock=lambda: T0, task_allow=("*",), queue_allow=("*",))
    assert "ALMA_TASK_ALLOW cannot allow them" in refusal(app, {"task": "alma_schedule.run"}, settings)
    line = refusal(app, {"task": "fleet.add", "options": {"queue": "alma.run"}}, settings)
    assert "ALMA_QUEUE_ALLOW cannot allow them" in line


def test_the_fleets_composition_applies_the_apps_alma_keys() -> None:
    app = Celery("fleet2", broker="memory://", set_as_current=False)
    app.conf.update(alma_database_url="memory://", alma_task_allow=["fleet.add"])

    @app.task(name="fleet.ping", shared=False)
    def ping() -> str:
        return "pong"

    composition = install(app)
    try:
        with pytest.raises(RegistrationRefused, match=r"task 'fleet.ping' is not allowed: .*ALMA_TASK_ALLOW"):
            composition.schedule().register(
                RoutineSpec("acme", "ops", "p", "task", {"every": "1h"}, {"task": "fleet.ping"})
            )
    finally:
        composition.close()


def test_a_process_without_the_fleets_app_refuses_every_task_routine(monkeypatch: pytest.MonkeyPatch) -> None:
    """It cannot see the app's task list, so it checks nothing and stores nothing: refused, loudly."""
    monkeypatch.delenv("ALMA_CELERY_APP", raising=False)
    settings = Settings(clock=lambda: T0)
    store = MemoryStore()
    schedule = create_schedule(store=store, runner=KindRegistry(settings).resolve, settings=settings)
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "r", "task", {"every": "5m"}, {"task": "fleet.add"})
    with pytest.raises(AlmaScheduleError, match="ALMA_CELERY_APP is not set"):
        schedule.register(spec, now=T0)
    assert list(store.iter_routines()) == []


def test_import_beat_refuses_the_entries_outside_the_allow_list_in_its_plan() -> None:
    app = fleet(
        beat_schedule={
            "collect": {"task": "alma_schedule.collect", "schedule": 60.0},
            "onto-ours": {"task": "fleet.add", "schedule": 60.0, "options": {"queue": "alma.run"}},
            "narrowed": {"task": "fleet.ping", "schedule": 60.0},
            "fine": {"task": "fleet.add", "schedule": 60.0},
        }
    )
    plan = plan_import(app, SCOPE, allow=TaskAllow(tasks=("fleet.add",)))
    by_name = {c.name: c for c in plan.conversions}
    assert by_name["fine"].ok
    assert "task 'alma_schedule.collect' is not allowed" in (by_name["collect"].refused or "")
    assert "queue 'alma.run' is not allowed" in (by_name["onto-ours"].refused or "")
    assert "ALMA_TASK_ALLOW (fleet.add)" in (by_name["narrowed"].refused or "")
