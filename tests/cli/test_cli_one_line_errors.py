"""Issue 45, item 12: every CLI command that touches the store turns every error into ONE line on
stderr with a non-zero exit (the traceback only with ``--debug``), against an unreachable store, an
unmigrated store and a 0.1.0 store (which names ``migrate --adopt``); every command that sends
refuses the ``memory://`` broker on a production store, ``tick --in-process`` before it claims
anything. Through the real click group (``CliRunner``), each case in its own tmp dir."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from alma_schedule.cli import cli
from alma_schedule.engine import create_schedule
from alma_schedule.model import RoutineSpec
from alma_schedule.runners.registry import registry_resolver
from alma_schedule.settings import load_settings
from alma_schedule.stores import open_store
from alma_schedule.testing.builders import everything

SCOPE = "acme/alice"
DEFINITION = json.dumps({"goal": "brief", "budget": {"per_turn_usd": {"usd": 0.05}}})
TURN = {"ALMA_PROVIDER": "scripted", "ALMA_SINK": "stdout"}
UNREACHABLE = {
    "ALMA_DATABASE_URL": "postgresql+psycopg://alma:pw@127.0.0.1:1/alma",  # nothing listens on port 1
    "ALMA_BROKER_URL": "redis://127.0.0.1:1/0",
}

#: Every command `alma-schedule --help` lists (with its subcommands) that reads or writes the store.
#: Not here: `schedule next`, `settings`, `hash-password` (no store), `demo` (its own store),
#: `serve-http` (a server), `clock send` (the broker only: below, with the memory:// broker).
STORE_COMMANDS: dict[str, tuple[str, ...]] = {
    "plan": ("plan",),
    "reindex": ("reindex",),
    "tick": ("tick",),
    "tick --in-process": ("tick", "--in-process"),
    "tick --in-process --json": ("tick", "--in-process", "--json"),
    "clock run": ("clock", "run"),
    "worker-check": ("worker-check",),
    "migrate": ("migrate",),
    "import-beat --apply": ("import-beat", "tests.beat.fleet_app:app", "acme/ops", "--apply"),
    "routines add": (
        "routines",
        "add",
        SCOPE,
        "r",
        "--kind",
        "turn",
        "--schedule",
        '{"every": 60}',
        "--definition",
        DEFINITION,
    ),
    "routines update": ("routines", "update", SCOPE, "r", "--schedule", '{"every": 120}'),
    "routines backfill": (
        "routines",
        "backfill",
        SCOPE,
        "r",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T01:00:00Z",
    ),
    **{
        f"routines {lever}": ("routines", lever, SCOPE, "r")
        for lever in ("delete", "describe", "disable", "enable", "next", "pause", "resume", "show", "trigger")
    },
    "routines list": ("routines", "list", SCOPE),
    "routines list --all": ("routines", "list", "--all"),
    "runs list": ("runs", "list", SCOPE),
    "runs erase": ("runs", "erase", SCOPE, "--yes"),
    "runs prune": ("runs", "prune", "--before", "2026-01-01T00:00:00Z"),
    "runs record": ("runs", "record", SCOPE, "r", "manual:x", "--outcome", "failed"),
    "runs stuck": ("runs", "stuck"),
}
#: The commands that send (on a production store with the memory:// broker: refused, nothing written).
SENDING: dict[str, tuple[str, ...]] = {
    "tick": ("tick",),
    "tick --in-process": ("tick", "--in-process"),
    "tick --in-process --json": ("tick", "--in-process", "--json"),
    "routines trigger": ("routines", "trigger", SCOPE, "due"),
    "clock send": ("clock", "send"),
    "clock run": ("clock", "run"),
}


def run(env: dict[str, str], *args: str) -> Result:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    return CliRunner().invoke(cli, list(args), env={**unset, **TURN, **env})


def one_line(result: Result) -> str:
    assert result.exit_code not in (0, None), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture(scope="session")
def _legacy_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.stores.legacy_support import build_0_1_0_store

    path = tmp_path_factory.mktemp("legacy") / "legacy.sqlite3"
    build_0_1_0_store(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["unreachable", "unmigrated", "0.1.0"])
def bad_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    if request.param == "unreachable":
        yield request.param, UNREACHABLE
        return
    path = tmp_path / "alma.sqlite3"
    if request.param == "0.1.0":
        shutil.copy(request.getfixturevalue("_legacy_template"), path)
    else:
        path.touch()
    yield request.param, {"ALMA_DATABASE_URL": f"sqlite:///{path}"}


@pytest.mark.parametrize("command", sorted(STORE_COMMANDS))
def test_every_store_command_fails_in_one_line(bad_store: tuple[str, dict[str, str]], command: str) -> None:
    kind, env = bad_store
    if kind == "unmigrated" and command == "migrate":
        pytest.skip("migrate is the cure of an unmigrated store")
    line = one_line(run(env, *STORE_COMMANDS[command]))
    if kind == "unreachable" and command != "tick":  # a production `tick` sends: its broker is unreachable too
        assert "is unavailable" in line, line
    elif kind == "unmigrated":
        assert "run `alma-schedule migrate`" in line, line
    elif kind == "0.1.0":
        assert "`alma-schedule migrate --adopt`" in line, line


def test_debug_still_shows_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "alma.sqlite3").touch()
    result = run({"ALMA_DATABASE_URL": f"sqlite:///{tmp_path}/alma.sqlite3"}, "--debug", "tick", "--in-process")
    assert result.exit_code != 0 and result.exception is not None
    assert type(result.exception).__name__ == "SchemaMismatch"


def _register_due(url: str) -> None:
    """One routine on the production store, due since an hour (registered through the engine)."""
    settings = load_settings(environ={"ALMA_DATABASE_URL": url, **TURN})
    store = open_store(url)
    try:
        sched = create_schedule(store=store, runner=registry_resolver(settings), settings=settings)
        spec = RoutineSpec("acme", "alice", "due", "turn", {"every": 60}, json.loads(DEFINITION))
        sched.register(spec, now=datetime.now(UTC) - timedelta(hours=1))
    finally:
        store.close()


@pytest.mark.parametrize("command", sorted(SENDING))
def test_the_memory_broker_is_refused_before_anything_is_claimed(migrated_pg_url: str, command: str) -> None:
    _register_due(migrated_pg_url)
    env = {"ALMA_DATABASE_URL": migrated_pg_url, "ALMA_BROKER_URL": "memory://"}
    line = one_line(run(env, *SENDING[command]))
    assert "ALMA_BROKER_URL is memory://" in line, line
    store = open_store(migrated_pg_url)
    try:
        _routines, runs = everything(store)
        assert [r for scope in runs for r in scope] == []  # no run claimed, none triggered
    finally:
        store.close()
