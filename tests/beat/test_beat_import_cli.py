"""``alma-schedule import-beat``: through click's runner and as a subprocess, on SQLite and PostgreSQL.

Without ``--apply`` nothing is written; with it every converted entry becomes a ``task`` routine;
running it twice creates nothing new.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from click.testing import CliRunner

from alma_schedule.beat.importer import apply_import, plan_import
from alma_schedule.cli import cli
from alma_schedule.engine import create_schedule
from alma_schedule.model import Scope
from alma_schedule.runners.task import TaskRunner
from alma_schedule.stores import open_store
from alma_schedule.stores.sql import migrate_store
from tests.beat import fleet_app

REPO = Path(__file__).resolve().parents[2]
ALMA = str(Path(sys.executable).parent / "alma-schedule")
SCOPE = Scope("acme", "ops")
APP = "tests.beat.fleet_app:app"
CONVERTED = {
    "reports-weekdays",
    "quarter-close",
    "weekend-sweep",
    "month-start",
    "sync",
    "heartbeat",
    "hourly",
    "lights",
}
REFUSED = {"first-monday", "jitter", "office", "routed", "ghost"}


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def routines(url: str) -> dict[str, Any]:
    store = open_store(url)
    try:
        return {r.routine_id: r for r in store.list_routines(SCOPE)}
    finally:
        store.close()


def test_preview_lists_every_entry_and_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/never.sqlite3"
    result = invoke("--database-url", url, "import-beat", APP, "acme/ops")
    assert result.exit_code == 0, result.output
    for name in CONVERTED | REFUSED:
        assert name in result.output
    assert "8 entries convert, 5 refused. Nothing written" in result.output
    anchoring = "(*) anchoring (sync, heartbeat, hourly): beat counts this interval from the entry's last run"
    assert anchoring in result.output
    assert not (tmp_path / "never.sqlite3").exists()  # the store was never even opened


def test_preview_json_says_converted_as_what_or_refused_why(tmp_path: Path) -> None:
    result = invoke("--database-url", f"sqlite:///{tmp_path}/x.sqlite3", "import-beat", APP, "acme/ops", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["zone"] == "Europe/Paris" and out["applied"] is None
    entries = {e["name"]: e for e in out["entries"]}
    assert set(entries) == CONVERTED | REFUSED
    assert entries["reports-weekdays"]["schedule"] == {"cron": "*/15 9-17 * * mon-fri", "tz": "Europe/Paris"}
    assert entries["sync"]["converted"] == "every 5m"
    assert "AND" in entries["first-monday"]["refused"] and "OR" in entries["first-monday"]["refused"]
    assert all(entries[n]["refused"] for n in REFUSED)
    assert not any(entries[n]["refused"] for n in CONVERTED)


def test_apply_registers_the_converted_entries_and_twice_creates_nothing_new(sqlite_url: str) -> None:
    migrate_store(sqlite_url)
    first = invoke("--database-url", sqlite_url, "import-beat", APP, "acme/ops", "--apply")
    assert first.exit_code == 0, first.output
    assert "8 created, 0 updated, 0 unchanged, 5 refused in acme/ops." in first.output
    stored = routines(sqlite_url)
    assert set(stored) == CONVERTED
    assert {r.kind for r in stored.values()} == {"task"}
    assert dict(stored["weekend-sweep"].schedule) == {"cron": "0 */6 * * 0,1,5,6", "tz": "Europe/Paris"}
    assert dict(stored["sync"].definition) == {
        "task": "fleet.add",
        "kwargs": {"x": 10, "y": 20},
        "options": {"queue": "fleet.sync", "priority": 5, "expires": 240},
    }
    second = invoke("--database-url", sqlite_url, "import-beat", APP, "acme/ops", "--apply", "--json")
    assert second.exit_code == 0, second.output
    applied = {a["name"]: a["outcome"] for a in json.loads(second.output)["applied"]}
    assert {n for n, o in applied.items() if o == "unchanged"} == CONVERTED
    assert {n for n, o in applied.items() if o == "refused"} == REFUSED
    again = routines(sqlite_url)
    assert {k: (r.config_revision, r.registered_at) for k, r in again.items()} == {
        k: (r.config_revision, r.registered_at) for k, r in stored.items()
    }


def test_a_changed_entry_is_updated_and_the_rest_unchanged() -> None:
    from alma_schedule.stores.memory import MemoryStore

    schedule = create_schedule(store=MemoryStore(), runner=TaskRunner(fleet_app.app))
    apply_import(schedule, plan_import(fleet_app.app, SCOPE))
    changed = Celery("fleet2", set_as_current=False)
    fleet_app.define_tasks(changed)
    changed.conf.update(timezone="Europe/Paris", beat_schedule=dict(fleet_app.BEAT_SCHEDULE))
    changed.conf.beat_schedule["sync"] = {**fleet_app.BEAT_SCHEDULE["sync"], "args": [7]}
    outcomes = {a.name: a.outcome for a in apply_import(schedule, plan_import(changed, SCOPE))}
    assert outcomes["sync"] == "updated"
    assert {n for n, o in outcomes.items() if o == "unchanged"} == CONVERTED - {"sync"}
    assert schedule.get(SCOPE, "sync").definition["args"] == [7]


def test_a_bad_app_path_is_one_line_and_exit_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--database-url", f"sqlite:///{tmp_path}/x", "import-beat", "tests.beat.nope:app", "acme/ops"]
    )
    assert result.exit_code == 1
    assert "MODULE:APP" in result.output and "tests.beat.nope" in result.output
    bad_scope = CliRunner().invoke(cli, ["import-beat", APP, "acme"])
    assert bad_scope.exit_code == 1 and "ORG/UID" in bad_scope.output


def _subprocess(url: str, *extra: str) -> dict[str, Any]:
    proc = subprocess.run(
        [ALMA, "--database-url", url, "import-beat", APP, "acme/ops", "--apply", "--json", *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "TZ": "UTC"},
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.mark.integration  # subprocesses
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_import_beat_as_a_subprocess_twice(backend: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    migrate_store(url)
    first = _subprocess(url)
    assert {a["name"] for a in first["applied"] if a["outcome"] == "created"} == CONVERTED
    second = _subprocess(url)
    assert {a["name"] for a in second["applied"] if a["outcome"] == "unchanged"} == CONVERTED
    assert first["entries"] == second["entries"]
    stored = routines(url)
    assert set(stored) == CONVERTED
    assert dict(stored["reports-weekdays"].schedule) == {
        "cron": "*/15 9-17 * * mon-fri",
        "tz": "Europe/Paris",
    }
    store = open_store(url)
    try:
        assert all(len(store.routine_versions(SCOPE, rid)) == 1 for rid in CONVERTED)
    finally:
        store.close()


def test_an_applied_import_names_its_actor_in_the_audit_trail(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/audit.sqlite3"
    migrate_store(url)
    done = invoke("--database-url", url, "import-beat", APP, "acme/ops", "--apply", "--actor", "ops-lead")
    assert done.exit_code == 0, done.output
    store = open_store(url)
    try:
        events = store.routine_events(SCOPE, "sync")
        assert [(e.actor, e.action) for e in events] == [("ops-lead", events[0].action)] and events[0].diff
        refused = invoke("--database-url", url, "import-beat", APP, "acme/ops", "--apply", "--actor", "x\x07y")
        assert refused.exit_code != 0 and "actor" in refused.output
        assert len(store.routine_events(SCOPE, "sync")) == 1  # nothing written
    finally:
        store.close()
