"""``install(app)`` as the whole integration: settings from the app's ``alma_*`` keys and ``ALMA_*``
read only where our code runs; our rules pinned whatever the app's defaults; sends through the
fleet's app; a fleet worker needs no ``ALMA_CELERY_APP``; every refusal is one line."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from celery import Celery
from celery_support import inprocess_worker, make_settings, utcnow
from fleet_project import celery, clean_env, one_line_error, python, write_fleet

from alma_schedule.celery import install
from alma_schedule.clock import send_tick
from alma_schedule.engine import create_schedule
from alma_schedule.errors import AlmaScheduleError, ConfigurationError
from alma_schedule.model import OUR_TASKS, RUN_TASK, TICK_TASK, RoutineSpec
from alma_schedule.runners.task import TaskDefinition, TaskRunner
from alma_schedule.settings import load_settings
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import CeleryDispatcher, composition_of

pytestmark = [pytest.mark.redis]


def raw(r: redis.Redis, queue: str) -> list[dict[str, object]]:
    return [json.loads(m) for m in reversed(r.lrange(queue, 0, -1))]


def test_importing_the_fleet_app_and_delay_never_fail_because_of_our_settings(tmp_path: Path, redis_url: str) -> None:
    root = write_fleet(tmp_path / "proj", broker=redis_url)
    code = (
        "import fleet\n"
        "fleet.add.delay(1, 2)\n"
        "fleet.app.tasks['alma_schedule.tick'].delay()\n"
        "from alma_schedule.tasks import composition_of\n"
        "try:\n"
        "    composition_of(fleet.app).settings\n"
        "except Exception as exc:\n"
        "    print('ours:', exc)\n"
    )
    env = clean_env(ALMA_FOO="1", ALMA_TICK_PERIOD="soon")
    done = python(root, code, env)
    assert done.returncode == 0, done.stderr
    # our code, when it runs, does validate: the same stray variable is named there
    assert "ours: unknown setting ALMA_FOO" in done.stdout
    r = redis.Redis.from_url(redis_url)
    assert len(raw(r, "celery")) == 1  # the fleet's own task went out
    (tick,) = raw(r, "alma.tick")  # ours, routed by the unvalidated queue names
    assert tick["content-type"] == "application/json"
    # and the bare import alone
    assert python(root, "import fleet", env).returncode == 0


def test_app_conf_from_an_object_is_read_by_the_one_loader() -> None:
    class Config:
        alma_claim_limit = 7
        alma_database_url = "sqlite:///x.sqlite3"
        broker_url = "memory://"

    app = Celery("fleet", set_as_current=False)
    app.config_from_object(Config)
    install(app)
    assert composition_of(app).settings.claim_limit == 7  # type: ignore[union-attr]
    assert load_settings(conf=app.conf, environ={"ALMA_CLAIM_LIMIT": "9"}).claim_limit == 9


def pinned_against(redis_url: str) -> Celery:
    """A fleet app whose defaults say everything our tasks must not do."""
    app = Celery("fleet", set_as_current=False)
    app.conf.update(
        broker_url=redis_url,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_retry_on_worker_lost=True,
        task_serializer="pickle",
        accept_content=["json", "pickle"],
        task_routes={"fleet.*": {"queue": "fleet"}},
    )

    @app.task(name="fleet.add", shared=False)
    def add(x: int, y: int) -> int:
        return x + y

    return app


def test_our_tasks_and_messages_pin_our_rules_whatever_the_app_defaults(redis_url: str) -> None:
    app = pinned_against(redis_url)
    install(app)
    for name in OUR_TASKS:
        task = app.tasks[name]
        assert task.acks_late is False, name
        assert task.reject_on_worker_lost is False, name
        assert task.retry_on_worker_lost is False, name
        assert task.serializer == "json", name
    settings = make_settings("sqlite:///unused.sqlite3", redis_url)
    CeleryDispatcher(app, settings).send_each([(["o", "u", "r", "f"], utcnow() + timedelta(minutes=1))])
    send_tick(settings, app=app)
    TaskRunner(app)._send(TaskDefinition.parse({"task": "fleet.add", "args": [1, 2]}), "t-1")
    app.tasks[TICK_TASK].delay()
    r = redis.Redis.from_url(redis_url)
    sent = raw(r, "alma.run") + raw(r, "alma.tick") + raw(r, "fleet")
    assert len(sent) == 4
    assert {m["content-type"] for m in sent} == {"application/json"}  # never the app's pickle


def test_a_worker_serving_our_queues_refuses_an_accept_content_other_than_json(redis_url: str, sqlite_url: str) -> None:
    app = pinned_against(redis_url)
    install(app, settings=make_settings(sqlite_url, redis_url))
    migrate_store(sqlite_url)
    with pytest.raises(ConfigurationError, match=r"accept_content=\['json', 'pickle'\].*accept_content=\['json'\]"):
        with inprocess_worker(app, ["alma.tick"]):
            pass
    with inprocess_worker(app, ["fleet"]):  # the fleet's own queues: none of our business
        pass
    composition_of(app).close()  # type: ignore[union-attr]


def test_a_fleet_worker_serves_task_routines_without_alma_celery_app_and_takes_our_limits_from_its_conf(
    redis_url: str, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ALMA_CELERY_APP", raising=False)
    migrate_store(sqlite_url)
    app = Celery("fleet", set_as_current=False)
    app.conf.update(broker_url=redis_url, alma_database_url=sqlite_url, alma_run_time_limit="90s", task_time_limit=5)

    @app.task(name="fleet.add", shared=False)
    def add(x: int, y: int) -> int:
        return x + y

    composition = install(app)
    assert app.tasks[RUN_TASK].soft_time_limit is None  # nothing read at install
    schedule = create_schedule(store=composition.store(), runner=TaskRunner(app), settings=composition.settings)
    schedule.register(RoutineSpec("acme", "ops", "adds", "task", {"every": "1h"}, {"task": "fleet.add"}))
    try:
        with inprocess_worker(app, ["alma.run", "alma.collect"]):
            assert composition.checked == ["task"]
        assert app.tasks[RUN_TASK].soft_time_limit == 90.0 and app.tasks[RUN_TASK].time_limit == 120.0
        assert app.tasks[TICK_TASK].soft_time_limit == 300.0  # the default, not the app's task_time_limit
        runner = composition.registry.runner("task")
        assert isinstance(runner, TaskRunner) and runner.app is app
    finally:
        composition.close()


@pytest.mark.parametrize(
    ("conf", "environ", "queues", "named"),
    [
        ({}, {"ALMA_FOO": "1"}, "alma.run", "unknown setting ALMA_FOO"),
        ({"alma_tick_perod": "1m"}, {}, "alma.tick", "did you mean alma_tick_period?"),
        # C_FORCE_ROOT: as root, Celery itself refuses a pickle worker before our check
        (
            {"accept_content": ["json", "pickle"]},
            {"C_FORCE_ROOT": "1"},
            "alma.run,alma.collect",
            "accept_content=['json']",
        ),
        (
            {"alma_database_url": "postgresql+psycopg://alma@127.0.0.1:1/none"},
            {},
            "alma.tick",
            "ALMA_DATABASE_URL is a production store but the broker_url of the Celery app 'fleet' is memory://",
        ),
    ],
)
def test_a_fleet_worker_refuses_to_start_with_one_line(
    tmp_path: Path, conf: dict[str, object], environ: dict[str, str], queues: str, named: str
) -> None:
    broker = "memory://" if "alma_database_url" in conf else "redis://127.0.0.1:6379/15"
    conf = {"alma_database_url": f"sqlite:///{tmp_path}/s.sqlite3", **conf}
    root = write_fleet(tmp_path / "proj", broker=broker, conf=conf)
    done = celery(root, "-A", "fleet", "worker", "-Q", queues, "-P", "solo", env=clean_env(**environ))
    assert named in one_line_error(done)


def test_the_ready_app_refuses_to_send_or_serve_a_production_store_on_the_memory_broker(tmp_path: Path) -> None:
    env = clean_env(ALMA_DATABASE_URL="postgresql+psycopg://alma@127.0.0.1:1/none")
    call = celery(tmp_path, "-A", "alma_schedule.celery", "call", "alma_schedule.tick", "--expires", "55", env=env)
    line = one_line_error(call)
    assert "ALMA_DATABASE_URL" in line and "ALMA_BROKER_URL is memory://" in line
    worker = celery(tmp_path, "-A", "alma_schedule.celery", "worker", "-Q", "alma.tick", "-P", "solo", env=env)
    line = one_line_error(worker)
    assert "ALMA_DATABASE_URL" in line and "ALMA_BROKER_URL is memory://" in line


def test_registering_a_task_routine_whose_app_cannot_be_imported_says_why(sqlite_url: str) -> None:
    from alma_schedule.runners.registry import KindRegistry
    from alma_schedule.settings import Settings
    from alma_schedule.stores import open_store

    migrate_store(sqlite_url)
    settings = Settings(database_url=sqlite_url, celery_app="nosuchfleet:app")
    store = open_store(sqlite_url)
    try:
        schedule = create_schedule(store=store, runner=KindRegistry(settings).resolve, settings=settings)
        with pytest.raises(AlmaScheduleError, match=r"ALMA_CELERY_APP: cannot import 'nosuchfleet': No module named"):
            schedule.register(RoutineSpec("acme", "ops", "adds", "task", {"every": "1h"}, {"task": "fleet.add"}))
    finally:
        store.close()
