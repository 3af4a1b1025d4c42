"""The kind -> runner registry: built-ins by import path, entry points, programmatic kinds, and the
start-up check that names the missing setting."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from alma_schedule.contracts import RoutineSpec, RunResult
from alma_schedule.engine import create_schedule
from alma_schedule.errors import ConfigurationError
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.tasks import BUILTIN_KINDS, KindRegistry, UnknownKindRunner, stored_kinds
from alma_schedule.tasks.registry import load_factory
from celery_support import ALMA, Recorder, alma_env, make_settings, runner_path


def test_builtin_kinds_are_import_paths_loaded_only_when_used() -> None:
    registry = KindRegistry(Settings(), use_entry_points=False)
    assert set(BUILTIN_KINDS) <= set(registry.kinds())
    assert registry.sources()["turn"] == BUILTIN_KINDS["turn"]
    for path in BUILTIN_KINDS.values():
        module = path.partition(":")[0]
        assert module not in sys.modules or module.startswith("alma_schedule.")


def test_builtin_factories_name_the_missing_setting() -> None:
    problems = []
    for kind, path in BUILTIN_KINDS.items():
        module = path.partition(":")[0]
        if importlib.util.find_spec(module) is None:  # a later part of the project ships it
            continue
        registry = KindRegistry(Settings(), use_entry_points=False)
        try:
            registry.runner(kind)
        except ConfigurationError as exc:
            problems.append((kind, str(exc)))
    for kind, message in problems:
        assert f"kind {kind!r} cannot be served" in message and "ALMA_" in message, message


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


def test_stored_kinds_and_worker_check_from_the_cli(sqlite_url: str, tmp_path: Path) -> None:
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, "memory://")
    store = open_store(sqlite_url)
    try:
        recorder = Recorder()
        schedule = create_schedule(store=store, runner=recorder, settings=settings)
        schedule.register(RoutineSpec("acme", "u1", "a", "count", {"every": "1h"}))
        schedule.register(RoutineSpec("acme", "u1", "b", "hooked", {"every": "1h"}))
        schedule.register(RoutineSpec("acme", "u1", "c", "gone", {"every": "1h"}))
        schedule.delete(schedule.get(schedule.list(RoutineSpec("acme", "u1", "c", "x", {}).scope)[0].scope, "c").scope, "c")
        assert stored_kinds(store) == {"count", "hooked"}
    finally:
        store.close()

    env = alma_env(settings, tmp_path)
    refused = subprocess.run([ALMA, "worker-check"], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert "ALMA_WEBHOOK_URL" in refused.stderr and "count" not in refused.stderr.split("serve the stored routines:")[1]
    env["ALMA_WEBHOOK_URL"] = "https://hooks.example/alma"
    served = subprocess.run([ALMA, "worker-check", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert served.returncode == 1  # count needs PostgreSQL: named too
    assert "count kind needs ALMA_DATABASE_URL on PostgreSQL" in served.stderr
