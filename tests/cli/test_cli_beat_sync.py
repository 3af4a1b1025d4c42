"""``alma-schedule -A APP beat sync [--dry-run]``, the source in ``routines list`` / ``describe``, and the
warning when a synced routine is edited by hand (through click's runner, on SQLite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from alma_schedule.beat.importer import plan_import
from alma_schedule.cli import cli
from alma_schedule.model import Scope
from alma_schedule.stores.sql import migrate_store
from tests.beat import fleet_app

APP = "tests.beat.fleet_app:app"
#: What import-beat converts of that app (the sync converts the same).
SYNCED = {c.name for c in plan_import(fleet_app.app, Scope("beat", "fleet")).converted}


def invoke(url: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--database-url", url, "-A", APP, *args], catch_exceptions=False)


def parsed(output: str) -> Any:
    """The JSON document of ``output`` (after any line naming the app found)."""
    return json.loads(output[min(i for i in (output.find("["), output.find("{")) if i >= 0) :])


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/s.sqlite3"
    migrate_store(url)
    return url


def test_the_dry_run_writes_nothing_and_the_sync_applies_it(url: str) -> None:
    dry = invoke(url, "beat", "sync", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    out = parsed(dry.output)
    assert out["scope"] == "beat/fleet" and out["dry_run"] is True
    assert {c["name"] for c in out["changes"]} == SYNCED and {c["action"] for c in out["changes"]} == {"create"}
    assert {k["name"] for k in out["kept_in_beat"]} >= {"office", "first-monday", "ghost"}
    assert len(SYNCED) >= 7 and not SYNCED & {"office", "first-monday", "ghost"}
    listed = invoke(url, "routines", "list", "beat/fleet", "--json")
    assert parsed(listed.output) == []  # nothing written
    applied = invoke(url, "beat", "sync")
    assert applied.exit_code == 0 and f"{len(SYNCED)} create." in applied.output, applied.output
    assert "stays in beat: office (" in applied.output
    again = invoke(url, "beat", "sync", "--dry-run")
    assert f"would: {len(SYNCED)} unchanged." in again.output, again.output


def test_the_source_is_shown_and_editing_a_synced_routine_warns(url: str) -> None:
    assert invoke(url, "beat", "sync").exit_code == 0
    assert "beat-sync:fleet" in invoke(url, "routines", "list", "beat/fleet").output  # a source column
    shown = invoke(url, "routines", "describe", "beat/fleet", "hourly")
    assert shown.exit_code == 0 and "beat-sync:fleet (entry hourly)" in shown.output, shown.output
    edited = invoke(url, "routines", "update", "beat/fleet", "hourly", "--schedule", '{"every": "2h"}')
    assert edited.exit_code == 0, edited.output
    assert "the next beat sync overwrites its schedule and definition" in edited.output
    rows = parsed(invoke(url, "routines", "list", "beat/fleet", "--json").output)
    hourly = next(r for r in rows if r["routine_id"] == "hourly")
    assert (hourly["source"], hourly["schedule"]["every"]) == ("beat-sync:fleet", "2h")  # the creator stays
    assert "update" in invoke(url, "beat", "sync", "--dry-run").output  # the next sync puts the code back
    added = invoke(url, "routines", "add", "acme/ops", "mine", "--kind", "task", "--schedule", '{"every": 60}',
                   "--definition", '{"task": "fleet.ping"}', "--json")  # fmt: skip
    assert added.exit_code == 0, added.output
    assert parsed(added.output)["routine"]["source"] == "cli" and "next beat sync" not in added.output


def test_a_bad_sync_scope_is_one_line_naming_the_setting(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALMA_BEAT_SYNC_SCOPE", "noslash")
    done = invoke(url, "beat", "sync", "--dry-run")
    assert done.exit_code == 1
    errors = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "alma_beat_sync_scope" in errors[0], done.output
