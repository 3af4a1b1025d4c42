"""The extras are honest: a FRESH venv per extra set, the package installed from a wheel of this
checkout (not editable: the wheel must carry the migrations), and a smoke of what that set promises,
run as subprocesses inside that venv.

* bare ``alma-schedule``: no Celery (nor any other extra's module) is importable; ``import
  alma_schedule``, ``schedule next``, the CLI on SQLite (migrate, routines add, ``tick
  --in-process``, runs list), the demo with --no-celery, and a programmatic in-process tick of a runner kind
  of this test on SQLite all work; each extra-only feature says, in one line, which extra to install.
* ``[celery,postgres]``: a REAL send to Redis through kombu's Redis transport (a tick via ``clock
  send`` and a run message via Celery's producer), read back from Redis; the SQL store migrates and
  opens on a fresh PostgreSQL database through psycopg.
* ``[all,test]``: pip resolves the whole set consistently (``pip check``); the HTTP and adapter
  modules and croniter import; every public name resolves.

The three venvs are built concurrently, once per module. Nothing here waits on time: each step is a
subprocess that either succeeds or not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from alma_schedule.stores.sql.schema import HEAD_REVISION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
#: Installing is network- and disk-bound: a generous ceiling for a hung pip, not a speed target.
INSTALL_TIMEOUT = 1500
RUN_TIMEOUT = 300
#: The top-level modules of each extra (what the bare install must NOT have).
EXTRA_MODULES = ("celery", "kombu", "redis", "psycopg", "starlette", "uvicorn", "httpx", "croniter")
SETS = {"bare": "", "celery_postgres": "celery,postgres", "all_test": "all,test"}
#: Not copied into the build tree (caches, venvs, build residue of an in-tree build).
NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", ".work")

SCHEDULE = '{"cron": "0 8 * * *", "tz": "Europe/Lisbon"}'
DEFINITION = '{"goal": "Morning briefing", "budget": {"per_turn_usd": {"usd": 0.05}}}'


class Venv:
    """A venv of its own with the package installed; runs commands in it with a clean environment."""

    def __init__(self, path: Path, work: Path) -> None:
        self.path = path
        self.work = work  # the cwd of every command: never the checkout (its source must not shadow)
        self.python = str(path / "bin" / "python")

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ALMA_", "PYTHON", "VIRTUAL_ENV", "CELERY_", "PYTEST_"))
        }
        keep["PATH"] = f"{self.path / 'bin'}{os.pathsep}{keep.get('PATH', '')}"
        return {**keep, "PYTHONNOUSERSITE": "1", **(extra or {})}

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.path / "bin" / args[0]), *args[1:]] if args[0] == "alma-schedule" else [self.python, *args]
        return subprocess.run(
            cmd, cwd=self.work, env=self.env(env), capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
        )

    def ok(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = self.run(*args, env=env)
        assert done.returncode == 0, f"{args} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def script(self, name: str, code: str, *args: str, env: dict[str, str] | None = None) -> str:
        path = self.work / name
        path.write_text(textwrap.dedent(code))
        return self.ok(str(path), *args, env=env)


def _pip(python: str, *args: str, cwd: Path) -> None:
    cmd = [python, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
    tail = f"{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    assert done.returncode == 0, f"pip {' '.join(args)} exited {done.returncode}\n{tail}"


def _build_wheel(base: Path) -> Path:
    """A wheel of this checkout, built from a copy of it (an in-tree build leaves build/ residue that
    a later wheel would ship, and concurrent builds in one tree race)."""
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    wheels = base / "wheels"
    _pip(sys.executable, "wheel", "-q", "--no-deps", "-w", str(wheels), str(src), cwd=base)
    (wheel,) = wheels.glob("alma_schedule-*.whl")
    return wheel


def _make_venv(base: Path, name: str, wheel: Path, extras: str) -> Venv:
    path = base / name
    work = base / f"{name}-work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "venv", str(path)], capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr
    venv = Venv(path, work)
    _pip(venv.python, "install", "-q", f"{wheel}[{extras}]" if extras else str(wheel), cwd=work)
    return venv


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Venv]]]:
    """The three venvs, built concurrently from one wheel (each test waits for the one it needs)."""
    base = tmp_path_factory.mktemp("extras")
    pool = ThreadPoolExecutor(max_workers=len(SETS))
    wheel = pool.submit(_build_wheel, base)
    futures = {
        name: pool.submit(lambda n=name, e=extras: _make_venv(base, n, wheel.result(), e))
        for name, extras in SETS.items()
    }
    try:
        yield futures
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def bare(venvs: dict[str, Future[Venv]]) -> Venv:
    return venvs["bare"].result()


@pytest.fixture(scope="module")
def celery_postgres(venvs: dict[str, Future[Venv]]) -> Venv:
    return venvs["celery_postgres"].result()


@pytest.fixture(scope="module")
def all_test(venvs: dict[str, Future[Venv]]) -> Venv:
    return venvs["all_test"].result()


# --- bare -----------------------------------------------------------------------------------------


def test_bare_has_no_extra_module_and_imports_from_the_venv(bare: Venv) -> None:
    probe = (
        "import importlib.util, json, sys, alma_schedule; alma_schedule.Schedule; alma_schedule.SqlStore;"
        f"print(json.dumps({{'file': alma_schedule.__file__, 'present': [m for m in {list(EXTRA_MODULES)!r} "
        "if importlib.util.find_spec(m) is not None], 'celery_loaded': 'celery' in sys.modules}))"
    )
    out = json.loads(bare.ok("-c", probe))
    assert Path(out["file"]).is_relative_to(bare.path), out["file"]  # the installed wheel, not the checkout
    assert out["present"] == [] and out["celery_loaded"] is False
    assert bare.run("-c", "import celery").returncode != 0


def test_bare_schedule_next_prints_fires(bare: Venv) -> None:
    after = ("--after", "2026-03-28T00:00:00Z")
    out = bare.ok("alma-schedule", "schedule", "next", SCHEDULE, *after, "-n", "3", "--json")
    assert [f["utc"] for f in json.loads(out)] == [
        "2026-03-28T08:00:00+00:00",
        "2026-03-29T07:00:00+00:00",  # Lisbon springs forward on 29 March 2026
        "2026-03-30T07:00:00+00:00",
    ]
    table = bare.ok("alma-schedule", "schedule", "next", SCHEDULE, *after, "-n", "2")
    assert "2026-03-29T07:00:00+00:00" in table  # the bare CLI draws its tables (rich is a core dependency)


def test_bare_cli_on_sqlite_ticks_in_process(bare: Venv) -> None:
    env = {
        "ALMA_DATABASE_URL": f"sqlite:///{bare.work}/cli.sqlite3",
        "ALMA_PROVIDER": "scripted",
        "ALMA_SINK": f"file:{bare.work}/out.jsonl",
    }
    assert HEAD_REVISION in bare.ok("alma-schedule", "migrate", env=env)  # the migrations are in the wheel
    bare.ok(
        "alma-schedule", "routines", "add", "acme/alice", "briefing", "--kind", "turn", "--schedule", SCHEDULE,
        "--definition", DEFINITION, "--at", "2026-03-01T12:00:00Z", env=env,
    )  # fmt: skip
    tick = ("tick", "--in-process", "--at", "2026-03-02T08:00:30Z", "--json")
    report = json.loads(bare.ok("alma-schedule", *tick, env=env))
    assert report["claimed"] == 1 and report["errors"] == 0
    runs = json.loads(bare.ok("alma-schedule", "runs", "list", "acme/alice", "--json", env=env))
    assert [(r["run_id"], r["state"], r["reason"]) for r in runs] == [
        ("2026-03-02T08:00:00Z", "completed", "delivered")
    ]
    assert "briefing" in bare.ok("alma-schedule", "routines", "list", "acme/alice", env=env)


def test_bare_programmatic_tick_on_sqlite(bare: Venv) -> None:
    code = """
        import json, sys
        from datetime import UTC, datetime, timedelta

        from alma_schedule import RoutineSpec, RunResult, Scope, create_schedule, migrate_store, open_store
        from alma_schedule.settings import Settings
        from alma_schedule.model import SettableTime

        T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
        url = sys.argv[1]
        migrate_store(url)
        store = open_store(url)
        ran = []

        class PackagingProbe:
            # a runner kind of this test: completes every fire at once
            def validate(self, routine):
                if routine.kind != "packaging-probe":
                    raise ValueError("not my kind")

            def run(self, routine, handle):
                ran.append(handle.key.run_id)
                return RunResult.completed("ok")

        clock = SettableTime(T0)
        schedule = create_schedule(store=store, runner=PackagingProbe(), settings=Settings(clock=clock))
        schedule.register(RoutineSpec("acme", "bob", "probe", "packaging-probe", {"every": "5m"}, {}), now=T0)
        at = clock.set(T0 + timedelta(minutes=5))
        report = schedule.tick(now=at)
        runs = store.list_runs(Scope("acme", "bob"))
        store.close()
        print(json.dumps({"claimed": len(report.claimed), "ran": ran,
                          "runs": [(r.run_id, r.state, r.reason) for r in runs]}))
    """
    out = json.loads(bare.script("probe_tick.py", code, f"sqlite:///{bare.work}/probe.sqlite3"))
    assert out == {
        "claimed": 1,
        "ran": ["2026-03-02T08:05:00Z"],
        "runs": [["2026-03-02T08:05:00Z", "completed", "ok"]],
    }


def test_bare_demo_without_celery(bare: Venv) -> None:
    """The governed part runs on a bare install; the two Celery parts are skipped, one line each."""
    out = bare.ok("alma-schedule", "demo", "--no-celery", "--hours", "2")
    assert "skipped (--no-celery): the fleet's tasks run on a real Celery worker, which needs the celery extra" in out
    assert "== part 2: the governed kinds" in out and "for 1 routine(s)" in out
    assert "skipped (--no-celery): real Celery ticks need the celery extra" in out
    part1 = out.split("== part 1")[1].split("== part 2")[0]  # the opening lines name every part; part 1 ran nothing
    assert "import-beat" not in part1 and "registered" not in part1 and "celery tick at" not in out


@pytest.mark.parametrize(
    ("what", "args", "env", "extra", "feature"),
    [
        ("celery adapter", ("-c", "import alma_schedule.celery"), {}, "celery", "the Celery face"),
        ("celery tasks", ("-c", "from alma_schedule.tasks import composition_of"), {}, "celery", "the Celery face"),
        (
            "openai adapter",
            ("-c", "import alma_schedule; alma_schedule.OpenAICompatibleProvider"),
            {},
            "openai",
            "the OpenAI-compatible provider",
        ),
        ("webhook sink", ("-c", "import alma_schedule.runners.adapters.webhook"), {}, "openai", None),
    ],
)
def test_bare_python_names_the_missing_extra(
    bare: Venv, what: str, args: tuple[str, ...], env: dict[str, str], extra: str, feature: str | None
) -> None:
    done = bare.run(*args, env=env)
    assert done.returncode == 1, what
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("alma_schedule.errors.ConfigurationError: "), done.stderr
    assert last.endswith(f"needs `pip install alma-schedule[{extra}]`"), last
    if feature is not None:
        assert last == f"alma_schedule.errors.ConfigurationError: {feature} needs `pip install alma-schedule[{extra}]`"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ("clock", "send"),
            {"ALMA_BROKER_URL": "redis://127.0.0.1:6379/0"},
            "sending ticks needs `pip install alma-schedule[celery]`",
        ),
        (
            ("routines", "list", "acme/alice"),
            {"ALMA_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"},
            "a PostgreSQL store needs `pip install alma-schedule[postgres]`",
        ),
        (("serve-http",), {"ALMA_HTTP_SECRET": "s3cret"}, "serve-http needs `pip install alma-schedule[http]`"),
        (
            ("demo", "--hours", "1"),
            {},
            "the demo with Celery (parts 1 and 3; --no-celery skips them) needs `pip install alma-schedule[celery]`",
        ),
    ],
    ids=["clock-send", "postgres-store", "serve-http", "demo-celery-parts"],
)
def test_bare_cli_names_the_missing_extra(bare: Venv, args: tuple[str, ...], env: dict[str, str], message: str) -> None:
    done = bare.run("alma-schedule", *args, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == f"error: {message}\n"


# --- [celery,postgres] ----------------------------------------------------------------------------


def test_celery_postgres_sends_to_redis_and_opens_postgres(celery_postgres: Venv, pg_url: str, redis_url: str) -> None:
    import redis

    venv = celery_postgres
    assert venv.run("-c", "import starlette").returncode != 0  # only what was asked for
    env = {
        "ALMA_DATABASE_URL": pg_url,
        "ALMA_BROKER_URL": redis_url,
        "ALMA_PROVIDER": "scripted",
        "ALMA_SINK": f"file:{venv.work}/out.jsonl",
    }
    assert HEAD_REVISION in venv.ok("alma-schedule", "migrate", env=env)
    assert json.loads(venv.ok("alma-schedule", "routines", "list", "acme/alice", "--json", env=env)) == []
    venv.ok(
        "alma-schedule", "routines", "add", "acme/alice", "briefing", "--kind", "turn", "--schedule", SCHEDULE,
        "--definition", DEFINITION, env=env,
    )  # fmt: skip
    # a tick through kombu alone, and a run message through Celery's producer: both over kombu's Redis transport
    task_id = venv.ok("alma-schedule", "clock", "send", env=env).strip()  # prints the task id
    venv.ok("alma-schedule", "routines", "trigger", "acme/alice", "briefing", env=env)
    runs = json.loads(venv.ok("alma-schedule", "runs", "list", "acme/alice", "--json", env=env))
    assert [(r["origin"], r["state"]) for r in runs] == [("manual", "claimed")]  # sent, not run here

    r = redis.Redis.from_url(redis_url)
    try:
        assert r.llen("alma.tick") == 1 and r.llen("alma.run") == 1
        tick = json.loads(r.lindex("alma.tick", 0))  # type: ignore[arg-type]
        run = json.loads(r.lindex("alma.run", 0))  # type: ignore[arg-type]
    finally:
        r.close()
    assert tick["headers"]["task"] == "alma_schedule.tick" and tick["headers"]["id"] == task_id
    assert tick["headers"]["expires"] is not None
    assert run["headers"]["task"] == "alma_schedule.run"


# --- [all,test] -----------------------------------------------------------------------------------


def test_all_test_resolves_and_imports(all_test: Venv) -> None:
    assert "No broken requirements" in all_test.ok("-m", "pip", "check", "--disable-pip-version-check")
    probe = (
        "import json, croniter, pytest, alma_schedule, alma_schedule.http, alma_schedule.runners.adapters.openai,"
        " alma_schedule.runners.adapters.webhook, alma_schedule.celery, alma_schedule.testing.fake_openai;"
        "missing = [n for n in alma_schedule.__all__ if getattr(alma_schedule, n, None) is None];"
        "print(json.dumps(missing))"
    )
    assert json.loads(all_test.ok("-c", probe)) == []
