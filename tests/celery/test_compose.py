"""docker-compose.yml without a Docker engine: it follows the three steps of docs/adopt.md (the schedule kept in the
fleet's code, ``install(app, beat_clock=True)``, ``migrate``, beat as the clock, the documented workers with
node names), parses and interpolates with no variable set, the image (Dockerfile) holds every module and file
its commands name, every queue is served, every variable is a setting or a documented compose variable, every
command and healthcheck answers, and the same commands run as local processes (from ``examples/``, the
image's ``/app``) against the test PostgreSQL and Redis."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from celery_support import VENV_BIN, Procs, reserved_port, wait_for, wait_worker_ready

from alma_schedule.settings import FIELDS, env_name, load_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
EXAMPLES = ROOT / "examples"  # stands for the image's /app (checked against the Dockerfile below)
ONE_SHOTS = ("migrate",)
LONG_RUNNING = ("worker-tick", "worker", "beat", "flower")
OURS = ONE_SHOTS + LONG_RUNNING
WORKERS = ("worker-tick", "worker")
SETTING_VARS = {env_name(name) for name, f in FIELDS.items() if f.metadata.get("kind") != "code"}
#: Variables of the compose file that are not our settings: Celery's own and Flower's.
COMPOSE_ONLY = {"CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "FLOWER_BASIC_AUTH"}


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


def services() -> dict[str, Any]:
    return compose()["services"]  # type: ignore[no-any-return]


def command(service: str, port: int | None = None) -> list[str]:
    argv = [str(a) for a in services()[service]["command"]]
    return [a.replace("5555", str(port)) for a in argv] if port else argv


def healthcheck(service: str, port: int | None = None) -> list[str]:
    """The healthcheck as a local argv: CMD as is, CMD-SHELL through ``sh -c`` (``$$`` is compose's ``$``)."""
    test = [str(a) for a in services()[service]["healthcheck"]["test"]]
    if port:
        test = [a.replace("5555", str(port)) for a in test]
    if test[0] == "CMD-SHELL":
        return ["sh", "-c", test[1].replace("$$", "$")]
    assert test[0] == "CMD", test
    return test[1:]


def local_env(service: str, **values: str) -> dict[str, str]:
    """The service's environment (compose values replaced by ``values``), no inherited ALMA_* or
    PYTHONPATH, and this venv first on PATH, as the image's PATH holds the installed commands."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_") and k != "PYTHONPATH"}
    for name, value in services()[service]["environment"].items():
        env[name] = str(value)
    env.update(values)  # local values, and a local store (ALMA_DATABASE_URL wins over the app's alma_database_url)
    env["PATH"] = os.pathsep.join([str(VENV_BIN), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    env["HOSTNAME"] = socket.gethostname()  # set by Docker in a container; %h of a node name
    return env


def run(argv: list[str], env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=EXAMPLES, env=env, capture_output=True, text=True, timeout=timeout)


def option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


# --------------------------------------------------------------------------- the file itself


def test_the_compose_file_parses_and_has_every_service() -> None:
    svc = services()
    assert set(svc) == {"postgres", "redis", *OURS}
    assert command("migrate") == ["alma-schedule", "-A", "fleet", "migrate"]  # step 3
    tick, worker = command("worker-tick"), command("worker")
    assert tick[:4] == ["celery", "-A", "fleet", "worker"] and worker[:4] == tick[:4]
    assert option(tick, "-Q") == "alma.tick" and option(tick, "-c") == "1" and "-E" in tick
    assert "-Q" not in worker and "-E" in worker  # the fleet's plain worker: it also serves our runs and collects
    assert command("beat")[:4] == ["celery", "-A", "fleet", "beat"]  # beat is the clock
    every = [" ".join(command(name)) for name in OURS]
    assert not any("import-beat" in c or "clock run" in c for c in every), every
    for name in OURS:  # every worker command we document gives a node name, each its own
        argv = command(name)
        if argv[:4] == ["celery", "-A", "fleet", "worker"]:
            assert option(argv, "-n").endswith("@%h"), name
    assert len({option(command(name), "-n") for name in WORKERS}) == len(WORKERS)
    assert svc["flower"]["ports"] == ["127.0.0.1:5555:5555"]
    for name in ONE_SHOTS:
        assert svc[name]["restart"] == "no"
    assert svc["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}  # not on itself
    for name in LONG_RUNNING:
        assert svc[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
        assert svc[name]["depends_on"]["redis"]["condition"] == "service_healthy", name
    for name in ("postgres", "redis", *LONG_RUNNING):  # every service that keeps running says if it is well
        assert svc[name]["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
    for name in WORKERS:
        node = option(command(name), "-n")
        assert healthcheck(name)[2].startswith(f"celery -A fleet inspect ping -d {node.replace('%h', '$HOSTNAME')} ")


def test_nothing_needs_a_variable_to_interpolate() -> None:
    """``docker compose down`` (or any command) works before a secret is set: every ``${VAR}`` has a
    default (``${VAR:-}``), none is required (``${VAR:?}``), and a literal ``$`` is written ``$$``."""
    text = COMPOSE.read_text()
    refs = re.findall(r"\$(\$|\{[^}]*\}|\w+)", text)
    assert refs, "the file names at least FLOWER_BASIC_AUTH"
    for ref in refs:
        if ref == "$":
            continue
        assert ref.startswith("{") and re.fullmatch(r"\{\w+:?-[^}?]*\}", ref), f"${ref} fails without a value"


def test_the_image_holds_every_module_and_file_the_commands_name() -> None:
    """The Dockerfile copies ``examples/X`` to ``/app/X`` and runs in ``/app``: ``examples/`` is the
    image's working directory, where ``-A fleet`` is found (as ``celery -A`` finds it: the cwd)."""
    lines = [line.split() for line in DOCKERFILE.read_text().splitlines() if line and not line.startswith("#")]
    workdirs = [w[1] for w in lines if w[0] == "WORKDIR"]
    assert workdirs[-1] == "/app"
    after = lines[[i for i, w in enumerate(lines) if w[0] == "WORKDIR"][-1] :]
    copied = {w[2].removeprefix("./"): w[1] for w in after if w[0] == "COPY"}
    assert copied == {"fleet": "examples/fleet", "deploy": "examples/deploy"}
    assert all((ROOT / src).is_dir() for src in copied.values())
    for name in OURS:
        argv = command(name)
        checks = [argv, *([healthcheck(name)] if "healthcheck" in services()[name] else [])]
        for cmd in checks:
            if cmd[:2] == ["sh", "-c"]:
                cmd = shlex.split(cmd[2])
            if "-A" in cmd:
                assert (EXAMPLES / option(cmd, "-A") / "__init__.py").is_file(), f"{name}: -A {option(cmd, '-A')}"
            if cmd[:2] == ["python", "-m"]:
                assert (EXAMPLES / (cmd[2].replace(".", "/") + ".py")).is_file(), f"{name}: {cmd[2]}"
            if cmd[0] == "sh":
                assert (EXAMPLES / cmd[1]).is_file(), f"{name}: {cmd[1]}"
            elif cmd[0] not in ("python",):
                assert (VENV_BIN / cmd[0]).exists(), f"{name}: {cmd[0]} is not installed"


def test_every_queue_is_served_and_ticks_have_a_worker_of_their_own() -> None:
    """Our three queues (from the fleet app's settings) and the queue of every fleet task and beat entry; the
    plain worker serves the app's default queues and, the app being JSON-only, our run and collect queues."""
    code = (
        "import json, fleet\n"
        "from alma_schedule.tasks import composition_of\n"
        "s = composition_of(fleet.app).settings\n"
        "tasks = [n for n in fleet.app.tasks if n.startswith('fleet.')]\n"
        "routed = {n: fleet.app.amqp.router.route({}, n)['queue'].name for n in tasks}\n"
        "beat = {e['task']: e.get('options', {}).get('queue') for e in fleet.app.conf.beat_schedule.values()}\n"
        "print(json.dumps({'ours': [s.tick_queue, s.run_queue, s.collect_queue], 'routed': routed, 'beat': beat,\n"
        "    'default': fleet.app.conf.task_default_queue, 'accept': list(fleet.app.conf.accept_content)}))\n"
    )
    done = run([str(VENV_BIN / "python"), "-c", code], local_env("worker"))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert set(found["routed"]) == {"fleet.tasks.heartbeat", "fleet.tasks.report"}
    assert set(found["beat"]) <= set(found["routed"])  # every beat entry names a task of the fleet
    assert found["accept"] == ["json"]  # JSON-only: a plain worker also serves our run and collect queues
    served = {name: set((option(command(name), "-Q") if "-Q" in command(name) else "").split(",")) for name in WORKERS}
    served["worker"] = {found["default"], *found["ours"][1:]}
    needed = {*found["ours"], *found["routed"].values(), *(q for q in found["beat"].values() if q)}
    assert needed <= served["worker-tick"] | served["worker"], needed - (served["worker-tick"] | served["worker"])
    tick_queue = found["ours"][0]
    assert served["worker-tick"] == {tick_queue} and tick_queue not in served["worker"]


def test_the_example_fleet_follows_the_three_steps() -> None:
    """Its schedule stays in code, its module names our store and calls ``install(app, beat_clock=True)``,
    and no service needs an ALMA_* variable (the store comes from the app, as step 2 says)."""
    module = (EXAMPLES / "fleet" / "__init__.py").read_text()
    assert "\ninstall(app, beat_clock=True)\n" in module and "beat_schedule={" in module
    code = (
        "import json, fleet\n"
        "from alma_schedule.tasks import composition_of\n"
        "print(json.dumps({'url': composition_of(fleet.app).settings.database_url,\n"
        "    'entries': sorted(fleet.app.conf.beat_schedule)}))\n"
    )
    env = {k: v for k, v in local_env("worker").items() if not k.startswith("ALMA_")}
    done = run([str(VENV_BIN / "python"), "-c", code], env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found == {
        "url": "postgresql+psycopg://alma:alma@postgres:5432/alma",
        "entries": ["daily-report", "heartbeat"],
    }
    for name in OURS:
        assert not [k for k in services()[name]["environment"] if k.startswith("ALMA_")], name


def test_every_variable_is_a_setting_or_a_documented_compose_variable() -> None:
    page = (ROOT / "docs" / "adopt.md").read_text()  # the site's adoption page documents the compose file
    section = page[page.index("## docker-compose") :]
    section = section.split("\n## ", 1)[0]
    for name in OURS:
        env = services()[name]["environment"]
        assert "CELERY_BROKER_URL" in env and "CELERY_RESULT_BACKEND" in env, name
        unknown = set(env) - SETTING_VARS - COMPOSE_ONLY
        assert not unknown, f"{name}: {unknown}"
        load_settings(environ={k: str(v) for k, v in env.items() if k in SETTING_VARS})  # each one is valid
    for var in COMPOSE_ONLY:
        assert var in section and var in COMPOSE.read_text().split("services:")[0], f"{var} is not documented"
    assert re.search(r"^FLOWER_BASIC_AUTH=$", (ROOT / ".env.example").read_text(), re.M)
    assert services()["flower"]["environment"]["FLOWER_BASIC_AUTH"] == "${FLOWER_BASIC_AUTH:-}"


@pytest.mark.parametrize("service", OURS)
def test_every_command_and_healthcheck_exists_and_answers_help(service: str) -> None:
    env = local_env(service, FLOWER_BASIC_AUTH="alma:s3cret")
    argvs = [command(service)]
    if "healthcheck" in services()[service]:
        check = healthcheck(service)
        if check[:2] == ["sh", "-c"]:
            argvs.append(shlex.split(check[2].replace("$HOSTNAME", env["HOSTNAME"])))
        else:  # python -m deploy.clock_health / python -c: not CLIs; they run in the smoke test below
            assert check[0] == "python", check
    for argv in argvs:
        done = run([*argv, "--help"], env, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "usage" in done.stdout.lower(), done.stdout[-2000:]


def test_flower_refuses_to_start_without_auth_in_one_line() -> None:
    done = run(command("flower"), local_env("flower", FLOWER_BASIC_AUTH=""), timeout=30)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: FLOWER_BASIC_AUTH is empty") and ".env.example" in line


# --------------------------------------------------------------------------- the commands, locally


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.slow
def test_the_compose_services_run_the_fleet_as_local_processes(pg_url: str, redis_url: str, tmp_path: Path) -> None:
    """migrate, the two workers, beat (its start syncs the beat_schedule into routines of beat/fleet) and
    Flower, with the compose commands and variables (local values): the synced routines run the fleet's
    tasks, and every healthcheck answers healthy (beat's only once a tick ran)."""
    from celery import Celery

    from alma_schedule.model import RunKey
    from alma_schedule.runners.task import task_id_for

    values = {"ALMA_DATABASE_URL": pg_url, "CELERY_BROKER_URL": redis_url, "CELERY_RESULT_BACKEND": redis_url}
    procs = Procs(tmp_path)
    try:
        env = local_env("migrate", **values)
        assert run(command("migrate"), env).returncode == 0
        unhealthy = run(healthcheck("beat"), local_env("beat", **values))
        assert unhealthy.returncode == 1 and unhealthy.stderr.strip() == "error: no tick has run yet"

        with reserved_port() as port:
            for name in WORKERS:
                start(procs, name, command(name), local_env(name, **values))
            flower_env = local_env("flower", FLOWER_BASIC_AUTH="alma:s3cret", **values)
            start(procs, "flower", command("flower", port), flower_env)
            for name in WORKERS:
                wait_worker_ready(procs, name, 60)
                ping = run(healthcheck(name), local_env(name, **values))
                assert ping.returncode == 0 and "pong" in ping.stdout, ping
            beat = [a.replace("/tmp/celerybeat-schedule", str(tmp_path / "beat-schedule")) for a in command("beat")]
            start(procs, "beat", beat, local_env("beat", **values))  # syncs, then a tick at once

            def synced() -> bool:
                assert dict(procs.procs)["beat"].poll() is None, procs.log("beat")[-3000:]
                done = run(["alma-schedule", "-A", "fleet", "routines", "list", "beat/fleet", "--json"], env)
                return done.returncode == 0 and {r["routine_id"] for r in json.loads(done.stdout)} == {
                    "heartbeat",
                    "daily-report",
                }

            wait_for(synced, 90, 0.5, "beat synced the beat_schedule into beat/fleet")
            keys = []
            for routine in ("heartbeat", "daily-report"):  # run now, through the fleet's app
                done = run(
                    ["alma-schedule", "-A", "fleet", "routines", "trigger", "beat/fleet", routine, "--json"], env
                )
                assert done.returncode == 0, done.stderr
                row = json.loads(done.stdout)
                keys.append(RunKey(row["org"], row["uid"], row["routine_id"], row["run_id"]))
            fleet = Celery("check", broker=redis_url, backend=redis_url, set_as_current=False)
            try:
                beat_of = fleet.AsyncResult(task_id_for(keys[0])).get(timeout=60)
                report = fleet.AsyncResult(task_id_for(keys[1])).get(timeout=60)
            finally:
                fleet.close()
            assert isinstance(beat_of, str) and report["period"] == "day"  # the beat entry's kwargs carried

            healthy = wait_for(
                lambda: (c := run(healthcheck("beat"), local_env("beat", **values))).returncode == 0 and c,
                60,
                0.5,
                "beat's healthcheck after the first tick",
            )
            assert healthy.stdout.startswith("ok: the last tick ran")

            def flower_up() -> bool:
                assert dict(procs.procs)["flower"].poll() is None, procs.log("flower")[-2000:]
                return run(healthcheck("flower", port), local_env("flower", **values)).returncode == 0

            wait_for(flower_up, 60, 0.5, "Flower's healthcheck")
        for name, proc in procs.procs:
            if name in WORKERS:
                assert procs.stop(proc, 60) == 0, procs.log(name)[-2000:]
    finally:
        procs.stop_all()


def start(procs: Procs, name: str, argv: list[str], env: dict[str, str]) -> None:
    """Start a compose command as a local process in ``examples/`` (the image's /app)."""
    program = argv[0] if argv[0] == "sh" else str(VENV_BIN / argv[0])
    procs.start(name, [program, *argv[1:]], env, cwd=EXAMPLES)
