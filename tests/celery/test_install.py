"""install() on a fleet's app, the lazy ready app, JSON only, and never becoming the current app."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from celery import Celery

from alma_schedule.celery import create_app, install, ready_app_config
from alma_schedule.errors import ConfigurationError
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, TICK_TASK
from alma_schedule.settings import Settings
from alma_schedule.tasks import composition_of, merge_routes, our_routes

OURS = {TICK_TASK, RUN_TASK, COLLECT_TASK, RUN_MANY_TASK}


def fleet_app(**conf: object) -> Celery:
    app = Celery("fleet", set_as_current=False)
    app.conf.update(
        broker_url="redis://127.0.0.1:6379/15",
        task_default_queue="fleet",
        task_acks_late=True,
        task_time_limit=10,
        worker_prefetch_multiplier=8,
        task_routes={"fleet.*": {"queue": "fleet"}, RUN_TASK: {"queue": "mine.run"}},
        **conf,
    )
    return app


def conf_snapshot(app: Celery) -> dict[str, object]:
    return {k: repr(v) for k, v in app.conf.items() if k != "task_routes"}


def test_install_registers_our_tasks_and_routes_and_leaves_the_rest_of_their_config_alone() -> None:
    app = fleet_app()
    before = conf_snapshot(app)
    settings = Settings(broker_url="redis://elsewhere:6379/0", run_time_limit=Settings().run_time_limit * 2)
    composition = install(app, settings=settings)

    assert conf_snapshot(app) == before  # broker, acks, limits, prefetch, serializers: all theirs
    assert OURS <= set(app.tasks)
    routes = app.conf.task_routes
    assert routes["fleet.*"] == {"queue": "fleet"}  # their route kept
    assert routes[RUN_TASK] == {"queue": "mine.run"}  # their choice for our name wins
    assert routes[TICK_TASK] == {"queue": "alma.tick"}
    assert app.amqp.router.route({}, TICK_TASK)["queue"].name == "alma.tick"
    assert app.amqp.router.route({}, "fleet.add")["queue"].name == "fleet"
    # our task options are set per task, not app-wide: a fleet's global limit never kills our runs
    run = app.tasks[RUN_TASK]
    assert run.acks_late is False and run.ignore_result is True
    assert run.soft_time_limit == 600.0 and run.time_limit == 630.0
    assert composition_of(app) is composition
    with pytest.raises(ConfigurationError, match="already installed"):
        install(app, settings=settings)


def test_our_tasks_do_not_leak_onto_other_apps() -> None:
    app = fleet_app()
    install(app, settings=Settings())
    other = Celery("other", set_as_current=False)
    other.finalize()
    assert not OURS & set(other.tasks)


def test_routes_survive_a_later_config_reload() -> None:
    app = Celery("fleet", set_as_current=False)
    install(app, settings=Settings())  # not configured yet: merged when the config loads

    class Config:
        task_routes = {"fleet.*": {"queue": "fleet"}}
        broker_url = "redis://127.0.0.1:6379/15"

    app.config_from_object(Config)
    assert app.conf.task_routes["fleet.*"] == {"queue": "fleet"}
    assert app.conf.task_routes[COLLECT_TASK] == {"queue": "alma.collect"}
    assert app.amqp.router.route({}, COLLECT_TASK)["queue"].name == "alma.collect"


def test_merge_routes_shapes() -> None:
    ours = our_routes(Settings())
    assert merge_routes(None, ours) == ours
    assert merge_routes({"a": {"queue": "x"}}, ours) == {**ours, "a": {"queue": "x"}}
    theirs = [{"b": {"queue": "y"}}]
    merged = merge_routes(theirs, ours)
    assert merged == (ours, {"b": {"queue": "y"}})
    assert merge_routes(merged, ours) == merged  # idempotent

    def router(name: str, *args: object, **kw: object) -> None:
        return None

    assert merge_routes(router, ours) == (ours, router)


def test_ready_app_is_json_only_with_events_and_our_queues() -> None:
    settings = Settings(broker_url="redis://127.0.0.1:6379/15", task_events=True)
    app = create_app(settings)
    conf = app.conf
    assert list(conf.accept_content) == ["json"]
    assert conf.task_serializer == conf.result_serializer == conf.event_serializer == "json"
    assert list(conf.result_accept_content) == ["json"]
    assert conf.worker_send_task_events is True and conf.task_send_sent_event is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.broker_connection_retry_on_startup is True
    assert {q.name for q in conf.task_queues} == {"alma.tick", "alma.run", "alma.collect"}
    off = create_app(Settings(task_events=False))
    assert off.conf.worker_send_task_events is False and off.conf.task_send_sent_event is False
    assert ready_app_config(settings)["task_routes"] == our_routes(settings)


def _python(code: str, env_extra: dict[str, str] | None = None) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env.update(env_extra or {})
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_builds_no_app_and_the_lazy_app_never_becomes_current() -> None:
    out = _python(
        """
        import celery._state as state
        from celery import Celery, shared_task, current_app

        fleet = Celery("fleet", broker="redis://fleet:6379/0")   # the fleet's own app: current
        @shared_task(name="fleet.add")
        def add(x, y): return x + y

        import alma_schedule
        assert "celery" not in dir(alma_schedule)
        import alma_schedule.celery as m
        from alma_schedule.celery import install
        assert m._app is None, "import built the app"
        assert state.get_current_app() is fleet
        app = m.app                                   # built now, lazily
        assert m.celery is app and m._app is app
        assert state.get_current_app() is fleet, "our app became current"
        assert state.default_app is not app
        assert add.app is fleet                       # their shared_task still bound to their app
        assert current_app.conf.broker_url == "redis://fleet:6379/0"
        print("ok", sorted(t for t in app.tasks if t.startswith("alma_schedule.")))
        """
    )
    ours = ["alert", "collect", "run", "run_many", "tick"]
    assert out == "ok " + str([f"alma_schedule.{name}" for name in ours])


def test_celery_cli_finds_the_lazy_app() -> None:
    import os

    from celery_support import CELERY

    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env["ALMA_BROKER_URL"] = "redis://127.0.0.1:6379/15"
    done = subprocess.run(
        [CELERY, "-A", "alma_schedule.celery", "report"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "'alma_schedule.tick': {'queue': 'alma.tick'}" in done.stdout
    assert "127.0.0.1:6379/15" in done.stdout
