"""The kind -> runner registry: built-ins by import path, entry points, programmatic kinds, and the
start-up check that names the missing setting."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from celery_support import ALMA, CELERY, Recorder, alma_env, make_settings, runner_path

from alma_schedule.engine import create_schedule
from alma_schedule.errors import ConfigurationError
from alma_schedule.model import RoutineSpec, RunResult, Scope
from alma_schedule.runners.registry import BUILTIN_KINDS, KindRegistry, UnknownKindRunner, load_factory, stored_kinds
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store


def test_builtin_kinds_are_import_paths_loaded_only_when_used() -> None:
    registry = KindRegistry(Settings(), use_entry_points=False)
    assert set(BUILTIN_KINDS) <= set(registry.kinds())
    assert registry.sources()["turn"] == BUILTIN_KINDS["turn"]
    probe = (
        "import sys; from alma_schedule.settings import Settings;"
        "from alma_schedule.runners.registry import KindRegistry;"
        "r = KindRegistry(Settings()); r.kinds(); r.runner('nope');"
        f"print([m for m in {sorted(p.partition(':')[0] for p in BUILTIN_KINDS.values())!r} if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # nothing imported until a routine of that kind is served


def test_builtin_factories_name_the_missing_setting() -> None:
    """With default settings no built-in kind can be served, and each says which setting is missing."""
    for kind, path in BUILTIN_KINDS.items():
        if importlib.util.find_spec(path.partition(":")[0]) is None:  # a later part ships it
            continue
        registry = KindRegistry(Settings(), use_entry_points=False)
        with pytest.raises(ConfigurationError, match=rf"kind '{kind}' cannot be served: ALMA_[A-Z_]+ is not set"):
            registry.runner(kind)


def test_programmatic_kinds_win_and_runners_are_built_once() -> None:
    built: list[Settings] = []
    recorder = Recorder()

    def factory(settings: Settings) -> Recorder:
        built.append(settings)
        return recorder

    registry = KindRegistry(Settings(), builtins=False, use_entry_points=False)
    registry.register("noop", factory)
    assert registry.runner("noop") is recorder and registry.runner("noop") is recorder
    assert len(built) == 1
    registry.forget_runners()
    registry.runner("noop")
    assert len(built) == 2
    assert registry.check(["noop", "noop"]) == ["noop"]
    with pytest.raises(ConfigurationError):
        registry.register("", factory)


def test_unknown_kinds_refuse_registration_fail_runs_and_fail_the_check() -> None:
    registry = KindRegistry(Settings(), builtins=False, use_entry_points=False)
    runner = registry.runner("nope")
    assert isinstance(runner, UnknownKindRunner)
    assert runner.run(None, None) == RunResult.failed("unknown_kind", cost_micros=0, error_class="UnknownKind")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'nope' has no runner"):
        registry.check({"nope"})
    with pytest.raises(ConfigurationError, match="must be 'module:factory'"):
        load_factory("no-colon")
    with pytest.raises(ConfigurationError, match="cannot be imported"):
        load_factory("alma_schedule.no_such_module:x")


def test_entry_points_add_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for entry in runner_path(tmp_path).split(":"):
        monkeypatch.syspath_prepend(entry)
    registry = KindRegistry(Settings(database_url="postgresql+psycopg://x@127.0.0.1/none"), builtins=False)
    assert registry.sources()["count"] == "e2e_runners:count_factory"
    assert type(registry.runner("count")).__name__ == "CountRunner"
    with pytest.raises(ConfigurationError, match="ALMA_WEBHOOK_URL is not set"):
        registry.check(["count", "hooked"])


@pytest.mark.redis
def test_stored_kinds_worker_check_and_a_worker_that_refuses_to_start(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, redis_url)
    store = open_store(sqlite_url)
    scope = Scope("acme", "u1")
    try:
        schedule = create_schedule(store=store, runner=Recorder(), settings=settings)
        schedule.register(RoutineSpec(scope.org, scope.uid, "a", "hooked", {"every": "1h"}))
        schedule.register(RoutineSpec(scope.org, scope.uid, "b", "hooked", {"every": "1h"}))
        schedule.register(RoutineSpec(scope.org, scope.uid, "c", "gone", {"every": "1h"}))
        schedule.delete(scope, "c")  # a deleted routine's kind needs no runner
        assert stored_kinds(store) == {"hooked"}
    finally:
        store.close()

    env = alma_env(settings, tmp_path)
    refused = subprocess.run([ALMA, "worker-check"], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert "kind 'hooked' cannot be served: ALMA_WEBHOOK_URL is not set" in refused.stderr
    worker = subprocess.run(
        [CELERY, "-A", "alma_schedule.celery", "worker", "-Q", "alma.run", "-c", "1", "--without-mingle"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode != 0
    assert "ALMA_WEBHOOK_URL is not set" in worker.stdout + worker.stderr
    assert "ready." not in worker.stdout + worker.stderr
    env["ALMA_WEBHOOK_URL"] = "https://hooks.example/alma"
    served = subprocess.run([ALMA, "worker-check", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert served.returncode == 0, served.stderr
    report = json.loads(served.stdout)
    assert report["ok"] is True and report["kinds"] == ["hooked"]
    assert report["sources"]["hooked"] == "e2e_runners:needs_webhook_factory"
