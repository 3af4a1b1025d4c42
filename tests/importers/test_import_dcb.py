"""import-dcb on django-celery-beat's own tables: migrated by its migrations, filled through its ORM
(a subprocess: Django stays out of pytest), on PostgreSQL, SQLite and a private MariaDB server."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from alma_schedule.cli import cli
from alma_schedule.core import parse_schedule
from alma_schedule.errors import SourceUnavailable, UnknownSourceSchema
from alma_schedule.importers.common import apply_plan
from alma_schedule.importers.dcb import plan_dcb
from alma_schedule.runners.task import TaskRunner
from tests.importers.mariadb_support import mariadb_server
from tests.importers.support import SCOPE, due_ids, fleet_app, routines, scheduler, whole
from tests.stores.sql_support import pg_database

SOURCE = Path(__file__).with_name("dcb_source.py")
KEPT = {"in-code": "in the app's beat_schedule: the beat sync owns it"}


def _base() -> datetime:
    """40 minutes past an hour a day ago: the hourly crontab's last run was at :30, its next is 1h later."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)  # only to lie near today's data
    return now - timedelta(days=1) + timedelta(minutes=40)


def populate(db: dict[str, Any], base: datetime) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(SOURCE), json.dumps(db), base.isoformat()],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stored: dict[str, Any] = json.loads(done.stdout)
    return stored


@pytest.fixture
def pg_source() -> Iterator[tuple[dict[str, Any], str]]:
    with pg_database(migrated=False) as url:
        name = url.rsplit("/", 1)[1]
        yield {"engine": "postgresql", "name": name, "user": "postgres", "host": "127.0.0.1", "port": 5432}, url


def _at(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).astimezone(UTC)


def check_import(url: str, db: dict[str, Any], target: str, tz: str | None) -> None:
    """The Done when: every field compared, the cursor from last_run_at, nothing replayed, due at the next fire."""
    base = _base()
    stored = populate(db, base)
    app = fleet_app()
    plan = plan_dcb(url, SCOPE, tz=tz, runner=TaskRunner(app), kept=KEPT)
    entries = {e.name: e for e in plan.entries}
    assert sorted(entries) == sorted(stored)
    hourly = entries["hourly-report"]
    assert hourly.spec is not None and dict(hourly.spec.schedule) == {"cron": "30 * * * *", "tz": "Europe/Paris"}
    assert dict(hourly.spec.definition) == {
        "task": "proj.report",
        "args": [1, 2],
        "kwargs": {"team": "ops"},
        "options": {"queue": "reports", "priority": 5},
    }
    assert hourly.cursor == _at(stored["hourly-report"]["last_run_at"]) and hourly.enabled
    ten = entries["every-ten"]
    assert ten.spec is not None and dict(ten.spec.schedule) == {"every": "10m"}
    assert dict(ten.spec.definition) == {"task": "proj.cleanup", "options": {"expires": 60}}
    digest = entries["weekday-digest"]
    assert digest.spec is not None and not digest.enabled
    assert dict(digest.spec.schedule) == {"cron": "0 9 * * 1-5", "tz": "Europe/Paris"}
    once = entries["once-daily"]
    assert once.spec is not None and once.cursor == _at(stored["once-daily"]["date_changed"])  # never ran
    assert parse_schedule(once.spec.schedule).to_json() == {"every": "1d"}
    assert once.spec.schedule["max_runs"] == 1
    assert _at(once.spec.schedule["not_before"]) == _at(stored["once-daily"]["start_time"])
    assert _at(once.spec.schedule["not_after"]) == _at(stored["once-daily"]["expires"])
    launch = entries["at-launch"]
    assert launch.spec is not None and _at(launch.spec.schedule["at"]) == base + timedelta(days=2)
    sunrise = entries["sunrise"]
    assert sunrise.spec is not None and dict(sunrise.spec.schedule) == {
        "solar": "sunrise",
        "lat": 48.8566,
        "lon": 2.3522,
    }
    routed = entries["routed"]
    assert routed.spec is None and routed.refused and "routing_key 'other'" in routed.refused
    assert entries["in-code"].skipped == KEPT["in-code"]
    late = {e.name: e for e in plan_dcb(url, SCOPE, tz=tz, now=base + timedelta(days=3)).entries}
    assert late["at-launch"].spec is None and "earlier than now" in (late["at-launch"].refused or "")

    with scheduler(target, app) as schedule:
        applied = {a.name: a.outcome for a in apply_plan(schedule, plan, now=base)}
        assert applied["hourly-report"] == "created" and applied["routed"] == "refused"
        assert applied["in-code"] == "skipped"
        rows = routines(schedule)
        assert "routed" not in rows and "in-code" not in rows
        for name, entry in entries.items():
            if entry.spec is None or name not in rows:
                continue
            row = rows[name]
            assert (row.source, row.source_entry, row.enabled) == ("import-dcb", name, entry.enabled)
            assert entry.cursor is not None and row.last_fire == whole(entry.cursor)
            assert dict(row.definition) == dict(entry.spec.definition)
        # between last_run_at and the next fire nothing replays; at the next fire it is due
        assert not {"hourly-report", "every-ten"} & due_ids(schedule, base)
        assert "hourly-report" in due_ids(schedule, base + timedelta(minutes=50))
        assert "every-ten" in due_ids(schedule, whole(base - timedelta(minutes=3)) + timedelta(minutes=10))
        assert "weekday-digest" not in due_ids(schedule, base + timedelta(days=7))  # disabled
        # re-running changes nothing
        again = apply_plan(schedule, plan_dcb(url, SCOPE, tz=tz, runner=TaskRunner(app), kept=KEPT), now=base)
        assert {a.outcome for a in again if a.name in rows} == {"unchanged"}
        assert routines(schedule) == rows


def test_import_from_postgresql(pg_source: tuple[dict[str, Any], str], tmp_path: Path) -> None:
    db, url = pg_source
    check_import(url, db, f"sqlite:///{tmp_path}/alma.sqlite3", tz=None)


def test_import_from_sqlite_into_postgresql(tmp_path: Path) -> None:
    path = tmp_path / "django.sqlite3"
    with pg_database(migrated=False) as target:
        # Django with USE_TZ=True stores naive UTC on SQLite: --tz UTC (the default would be Paris, the crontabs')
        check_import(f"sqlite:///{path}", {"engine": "sqlite3", "name": str(path)}, target, tz="UTC")


def test_import_from_mariadb(tmp_path: Path) -> None:
    with mariadb_server(tmp_path) as (socket, database):
        db = {"engine": "mysql", "name": database, "user": "root", "host": socket}
        url = f"mysql://root@localhost/{database}?unix_socket={socket}"  # no driver named: PyMySQL
        check_import(url, db, f"sqlite:///{tmp_path}/alma.sqlite3", tz="UTC")


def test_the_dry_run_table_writes_nothing_and_names_the_zone(tmp_path: Path) -> None:
    path = tmp_path / "django.sqlite3"
    populate({"engine": "sqlite3", "name": str(path)}, _base())
    before = path.read_bytes()
    store = f"sqlite:///{tmp_path}/alma.sqlite3"
    out = CliRunner().invoke(cli, ["--database-url", store, "import-dcb", "--from", f"sqlite:///{path}", "acme/ops"])
    assert out.exit_code == 0, out.output
    assert "Europe/Paris: the crontabs' timezone" in out.output
    assert "Nothing written" in out.output and "routing_key 'other'" in out.output
    assert "not checked against the fleet app" in out.output
    assert path.read_bytes() == before  # the source is never written to
    assert not Path(f"{tmp_path}/alma.sqlite3").exists()
    refused = CliRunner().invoke(cli, ["import-dcb", "--from", f"sqlite:///{path}", "acme/ops", "--apply"])
    assert refused.exit_code == 1 and "--apply needs the fleet's Celery app" in refused.output
    with sqlite3.connect(path) as conn:  # django-celery-beat before 2.0 had no crontab timezone
        conn.execute("ALTER TABLE django_celery_beat_crontabschedule DROP COLUMN timezone")
    old = CliRunner().invoke(cli, ["import-dcb", "--from", f"sqlite:///{path}", "acme/ops"])
    assert old.exit_code == 1
    assert old.output.strip() == (
        "error: django_celery_beat_crontabschedule has no column timezone: django-celery-beat's schema "
        "before 2.0 (migrate it to 2.x first)"
    )


def test_an_unreachable_source_and_an_unknown_schema_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="--from postgresql"):
        plan_dcb("postgresql+psycopg://postgres:secret@127.0.0.1:1/nowhere", SCOPE)
    with pytest.raises(SourceUnavailable, match="no such SQLite file"):
        plan_dcb(f"sqlite:///{tmp_path}/missing.sqlite3", SCOPE)
    assert not (tmp_path / "missing.sqlite3").exists()
    empty = tmp_path / "empty.sqlite3"
    empty.write_bytes(b"")
    with pytest.raises(UnknownSourceSchema, match="django_celery_beat_periodictask"):
        plan_dcb(f"sqlite:///{empty}", SCOPE)
    out = CliRunner().invoke(cli, ["import-dcb", "--from", "postgresql://u:pw@127.0.0.1:1/x", "acme/ops"])
    assert out.exit_code == 1 and len(out.output.strip().splitlines()) == 1 and "pw" not in out.output


def test_the_cli_applies_with_the_fleet_app_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "django.sqlite3"
    populate({"engine": "sqlite3", "name": str(path)}, _base())
    store = f"sqlite:///{tmp_path}/alma.sqlite3"
    run = ["-A", "tests.importers.fleet:app", "--database-url", store]
    assert CliRunner().invoke(cli, [*run, "migrate"]).exit_code == 0
    args = [*run, "import-dcb", "--from", f"sqlite:///{path}", "acme/ops", "--tz", "UTC", "--apply"]
    first = CliRunner().invoke(cli, [*args, "--json"])
    assert first.exit_code == 0, first.output
    outcomes = {a["name"]: a["outcome"] for a in json.loads(first.output)["applied"]}
    assert outcomes["hourly-report"] == "created" and outcomes["in-code"] == "skipped"
    assert outcomes["routed"] == "refused"
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    created = sum(1 for v in outcomes.values() if v == "created")
    assert f"0 created, 0 updated, {created} unchanged" in again.output
