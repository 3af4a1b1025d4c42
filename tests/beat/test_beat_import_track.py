"""``import-beat --track --deadline``, the dry run's warnings (one line each), and the wording of
untracked runs: ``completed(sent)`` says the task was SENT, not that it ran."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from alma_schedule.cli import cli
from alma_schedule.engine import create_schedule
from alma_schedule.model import RoutineSpec, Scope
from alma_schedule.runners.task import TaskRunner
from alma_schedule.stores import open_store
from alma_schedule.stores.sql import migrate_store
from tests.beat import fleet_app

APP = "tests.beat.fleet_app:app"
SCOPE = Scope("acme", "ops")

TRACKED_FLEET = """
from datetime import timedelta
from celery import Celery
from celery.schedules import crontab

app = Celery("tracked", broker="memory://", backend="cache+memory://", set_as_current=False)
app.conf.update(timezone="UTC", result_expires=timedelta(days=1), beat_schedule={
    "nightly": {"task": "tracked.build", "schedule": crontab(minute=30, hour=2)},
    "sync": {"task": "tracked.build", "schedule": timedelta(minutes=5)},
    "quiet": {"task": "tracked.quiet", "schedule": 600},
})


@app.task(name="tracked.build", shared=False)
def build():
    return 1


@app.task(name="tracked.quiet", shared=False, ignore_result=True)
def quiet():
    return None
"""


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)


@pytest.fixture
def tracked_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "tracked_fleet.py").write_text(TRACKED_FLEET)
    monkeypatch.chdir(tmp_path)  # import-beat finds MODULE:APP from the working directory
    yield "tracked_fleet:app"
    sys.modules.pop("tracked_fleet", None)


def test_the_dry_run_shows_each_warning_on_its_own_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/never.sqlite3"
    out = invoke("--database-url", url, "import-beat", APP, "acme/ops").output
    lines = out.splitlines()
    assert "warnings:" in lines
    assert (
        "  heartbeat: every 30s is shorter than the tick period (60s): a fixed-cadence clock (cron, `clock send`, "
        "`clock run --every`) runs it at most once per tick; beat with install(app, beat_clock=True) and "
        "`clock run` wake at each fire and keep its rate"
    ) in lines
    assert any(line.startswith("  first-monday: refused: day_of_month '1-7'") and "(AND)" in line for line in lines)
    assert any(line.startswith("  (*) anchoring (sync, heartbeat, hourly): beat counts") for line in lines)
    # against a 10 s tick period the 30 s entry is no longer short
    ten = invoke("--database-url", url, "import-beat", APP, "acme/ops", env={"ALMA_TICK_PERIOD": "10s"}).output
    assert "heartbeat: every 30s" not in ten
    as_json = json.loads(invoke("--database-url", url, "import-beat", APP, "acme/ops", "--json").output)
    assert as_json["warnings"][0].startswith("first-monday: refused") and len(as_json["warnings"]) == 3
    assert not (tmp_path / "never.sqlite3").exists()


def test_untracked_imports_say_sent_not_ran(tmp_path: Path) -> None:
    out = invoke("--database-url", f"sqlite:///{tmp_path}/x.sqlite3", "import-beat", APP, "acme/ops").output
    assert "untracked: each run ends completed(sent) once the task is SENT" in out


def test_track_deadline_creates_tracked_routines(sqlite_url: str, tracked_app: str) -> None:
    migrate_store(sqlite_url)
    dry = invoke("--database-url", sqlite_url, "import-beat", tracked_app, "acme/ops", "--track", "--deadline", "1h")
    assert dry.exit_code == 0, dry.output
    assert "untracked" not in dry.output
    assert "ignores its results" in dry.output  # refused in the dry run already, not only at --apply
    done = invoke(
        "--database-url",
        sqlite_url,
        "import-beat",
        tracked_app,
        "acme/ops",
        "--track",
        "--deadline",
        "1h",
        "--apply",
        "--json",
    )
    assert done.exit_code == 0, done.output
    applied = {a["name"]: a["outcome"] for a in json.loads(done.output)["applied"]}
    assert applied == {"nightly": "created", "sync": "created", "quiet": "refused"}
    store = open_store(sqlite_url)
    try:
        stored = {r.routine_id: dict(r.definition) for r in store.list_routines(SCOPE)}
    finally:
        store.close()
    assert stored == {
        "nightly": {"task": "tracked.build", "track": True, "deadline": "1h"},
        "sync": {"task": "tracked.build", "track": True, "deadline": "1h"},
    }


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--track"], "--track needs --deadline"),
        (["--deadline", "1h"], "--deadline applies only with --track"),
        (["--track", "--deadline", "soon"], "--deadline 'soon'"),
    ],
)
def test_track_flags_are_refused_in_one_line(tmp_path: Path, flags: list[str], named: str) -> None:
    args = ["--database-url", f"sqlite:///{tmp_path}/x", "import-beat", APP, "acme/ops", *flags]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and named in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_track_without_a_result_backend_refuses_every_entry_in_the_dry_run(tmp_path: Path) -> None:
    out = invoke(
        "--database-url",
        f"sqlite:///{tmp_path}/x",
        "import-beat",
        APP,
        "acme/ops",
        "--track",
        "--deadline",
        "1h",
        "--json",
    ).output
    entries = json.loads(out)["entries"]
    assert entries and all(e["refused"] for e in entries)
    assert sum("has no result backend" in e["refused"] for e in entries) == 8  # the eight that convert untracked


def test_runs_list_says_a_sent_run_was_only_sent(sqlite_url: str) -> None:
    migrate_store(sqlite_url)
    store = open_store(sqlite_url)
    try:
        schedule = create_schedule(store=store, runner=TaskRunner(fleet_app.app))
        schedule.register(RoutineSpec("acme", "ops", "sync", "task", {"every": "5m"}, {"task": "fleet.add"}))
        run = schedule.execute(schedule.trigger(SCOPE, "sync").key)
        assert (run.state, run.reason) == ("completed", "sent")
    finally:
        store.close()
    out = invoke("--database-url", sqlite_url, "runs", "list", "acme/ops").output
    assert "completed(sent): the task was SENT (untracked: the fleet task's own outcome is not known" in out
