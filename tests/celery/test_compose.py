"""docker-compose.yml without a Docker engine: it parses, every command exists and answers --help,
every environment variable is a setting, and the same commands run as local processes against
the test PostgreSQL and Redis."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from celery_support import VENV_BIN, Procs, alma_env, make_settings, utcnow, wait_for, wait_worker_ready

from alma_schedule.settings import FIELDS, env_name, load_settings

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
OURS = ("migrate", "worker-tick", "worker", "clock", "flower")
SETTING_VARS = {env_name(name) for name, f in FIELDS.items() if f.metadata.get("kind") != "code"}


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


def command(service: str, **subst: str) -> list[str]:
    argv = list(compose()["services"][service]["command"])
    out = []
    for arg in argv:
        for name, value in subst.items():
            start = arg.find("${" + name)
            if start >= 0:
                arg = arg[:start] + value + arg[arg.index("}", start) + 1 :]
        out.append(arg)
    return out


def local(argv: list[str]) -> list[str]:
    """The compose command with its program resolved in this venv (as the image's PATH would)."""
    program = VENV_BIN / argv[0]
    assert program.exists(), f"{argv[0]} is not installed"
    return [str(program), *argv[1:]]


def test_the_compose_file_parses_and_has_every_service() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", *OURS}
    assert services["migrate"]["command"] == ["alma-schedule", "migrate"]
    tick = services["worker-tick"]["command"]
    assert tick[tick.index("-Q") + 1] == "alma.tick" and tick[tick.index("-c") + 1] == "1" and "-E" in tick
    worker = services["worker"]["command"]
    assert worker[worker.index("-Q") + 1] == "alma.run,alma.collect" and "-E" in worker
    assert services["clock"]["command"] == ["alma-schedule", "clock", "run", "--every", "60s"]
    flower = services["flower"]
    assert flower["ports"] == ["127.0.0.1:5555:5555"]  # Flower is open without auth: localhost only
    assert any(a.startswith("--basic-auth=${FLOWER_BASIC_AUTH") for a in flower["command"])
    for name in ("worker-tick", "worker", "clock", "flower"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_every_environment_variable_is_a_setting_the_settings_read() -> None:
    services = compose()["services"]
    for name in OURS:
        env = services[name]["environment"]
        assert env, name
        assert set(env) <= SETTING_VARS, f"{name}: {set(env) - SETTING_VARS}"
        settings = load_settings(environ={k: str(v) for k, v in env.items()})
        assert settings.database_url.startswith("postgresql+psycopg://")
        assert settings.broker_url.startswith("redis://") and settings.task_events is True


@pytest.mark.parametrize("service", OURS)
def test_every_command_exists_and_answers_help(service: str) -> None:
    argv = [*local(command(service, FLOWER_BASIC_AUTH="alma:s3cret")), "--help"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env.update({k: str(v) for k, v in compose()["services"][service]["environment"].items()})
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Usage" in done.stdout or "usage" in done.stdout.lower()


@pytest.mark.postgres
@pytest.mark.redis
def test_smoke_the_compose_commands_as_local_processes(pg_url: str, redis_url: str, tmp_path: Path) -> None:
    from e2e_runners import count_factory, create_effects_table, libpq_url

    from alma_schedule.engine import create_schedule
    from alma_schedule.model import RoutineSpec
    from alma_schedule.stores import open_store

    settings = make_settings(pg_url, redis_url)
    services = compose()["services"]
    env = alma_env(settings, tmp_path, ALMA_TASK_EVENTS="true")
    assert set(services["worker"]["environment"]) <= set(env)  # the same variables, local values
    procs = Procs(tmp_path)
    try:
        migrate = procs.start("migrate", local(command("migrate")), env)
        assert migrate.wait(60) == 0, procs.log("migrate")
        create_effects_table(pg_url)
        store = open_store(pg_url)
        schedule = create_schedule(store=store, runner=count_factory(settings), settings=settings)
        spec = RoutineSpec("acme", "compose", "hello", "count", {"every": "1h"})
        schedule.register(spec, now=utcnow().replace(microsecond=0) - schedule.settings.tick_period * 60)
        store.close()

        for name in ("worker-tick", "worker"):
            procs.start(name, local(command(name)), env)
        for name in ("worker-tick", "worker"):
            wait_worker_ready(procs, name)
        clock = procs.start("clock", local(command("clock")), env)  # sends its first tick at once

        def effects() -> list[tuple[str, str]]:
            import psycopg

            with psycopg.connect(libpq_url(pg_url)) as conn:
                return conn.execute("SELECT routine_id, run_id FROM e2e_effects").fetchall()

        done = wait_for(effects, 30, 0.2, "the routine to run through the compose commands")
        assert Counter(r[0] for r in done) == Counter({"hello": 1})
        assert procs.stop(clock) == 0
        for name, proc in procs.procs:
            if name in ("worker-tick", "worker"):
                assert procs.stop(proc) == 0, procs.log(name)[-2000:]
    finally:
        procs.stop_all()
