"""Every operator command through its real entry point (click's runner on the real `cli` group, and a
subprocess for the console script), on SQLite and PostgreSQL, including the error paths."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from alma_schedule.cli import cli
from alma_schedule.stores import migrate_store

SCHEDULE = '{"cron": "0 8 * * *", "tz": "Europe/Lisbon"}'
DEFINITION = {"goal": "Morning briefing", "budget": {"per_turn_usd": {"usd": 0.05}}}


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/cli.sqlite3"
    else:
        url = request.getfixturevalue("pg_url")
    yield {"ALMA_DATABASE_URL": url, "ALMA_PROVIDER": "scripted", "ALMA_SINK": f"file:{tmp_path}/out.jsonl"}


def run(env: dict[str, str], *args: str) -> Result:
    """Invoke the real click group with exactly ``env`` as the ALMA_* environment."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    return CliRunner().invoke(cli, list(args), env={**unset, **env})


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.output


def add_briefing(env: dict[str, str], tmp_path: Path) -> None:
    definition = tmp_path / "briefing.json"
    definition.write_text(json.dumps(DEFINITION))
    out = ok(
        run(
            env,
            "routines",
            "add",
            "acme/alice",
            "briefing",
            "--kind",
            "turn",
            "--schedule",
            SCHEDULE,
            "--definition",
            f"@{definition}",
        )
    )
    assert "registered acme/alice/briefing" in out
    assert out.count("T07:00:00+00:00") + out.count("T08:00:00+00:00") >= 3  # the 3 next fires


def test_migrate_twice(env: dict[str, str]) -> None:
    before = run(env, "routines", "list", "acme/alice")
    assert before.exit_code == 1 and "migrate" in before.output  # not migrated yet: says what to do
    ok(run(env, "migrate"))
    ok(run(env, "migrate"))
    assert json.loads(ok(run(env, "routines", "list", "acme/alice", "--json"))) == []


def test_routines_lifecycle(env: dict[str, str], tmp_path: Path, redis_url: str) -> None:
    migrate_store(env["ALMA_DATABASE_URL"])
    env = {**env, "ALMA_BROKER_URL": redis_url}  # a trigger on PostgreSQL would send
    add_briefing(env, tmp_path)
    listed = json.loads(ok(run(env, "routines", "list", "acme/alice", "--json")))
    assert [r["routine_id"] for r in listed] == ["briefing"]
    assert listed[0]["next_due_at"] is not None
    shown = json.loads(ok(run(env, "routines", "show", "acme/alice", "briefing", "--json")))
    assert shown["definition"]["goal"] == "Morning briefing"
    # another scope sees nothing
    assert json.loads(ok(run(env, "routines", "list", "other/bob", "--json"))) == []
    assert "paused" in ok(run(env, "routines", "pause", "acme/alice", "briefing", "--reason", "maintenance"))
    paused = json.loads(ok(run(env, "routines", "show", "acme/alice", "briefing", "--json")))
    assert paused["paused_reason"] == "maintenance" and paused["next_due_at"] is None
    refused = run(env, "routines", "trigger", "acme/alice", "briefing")
    assert refused.exit_code == 1 and "paused" in refused.output
    ok(run(env, "routines", "resume", "acme/alice", "briefing"))
    ok(run(env, "routines", "disable", "acme/alice", "briefing"))
    assert json.loads(ok(run(env, "routines", "show", "acme/alice", "briefing", "--json")))["enabled"] is False
    ok(run(env, "routines", "enable", "acme/alice", "briefing"))
    nxt = json.loads(ok(run(env, "routines", "next", "acme/alice", "briefing", "-n", "10", "--json")))
    assert len(nxt) == 10 and all(p["zone"] == "Europe/Lisbon" for p in nxt)
    ok(run(env, "routines", "delete", "acme/alice", "briefing"))
    assert json.loads(ok(run(env, "routines", "list", "acme/alice", "--json"))) == []


def test_trigger_runs_embedded_and_ledger(env: dict[str, str], tmp_path: Path, redis_url: str) -> None:
    migrate_store(env["ALMA_DATABASE_URL"])
    env = {**env, "ALMA_BROKER_URL": redis_url}
    add_briefing(env, tmp_path)
    out = ok(run(env, "routines", "trigger", "acme/alice", "briefing"))
    assert "triggered acme/alice/briefing/manual:" in out
    runs = json.loads(ok(run(env, "runs", "list", "acme/alice", "--json")))
    assert len(runs) == 1 and runs[0]["origin"] == "manual"
    if env["ALMA_DATABASE_URL"].startswith("sqlite"):
        # embedded: the run executed in-process (scripted provider, stdout sink)
        assert runs[0]["state"] == "completed" and runs[0]["reason"] == "delivered"
    else:
        # production store: the run message went to the broker; nothing ran here
        assert runs[0]["state"] == "claimed"
        import redis

        assert redis.Redis.from_url(redis_url).llen("alma.run") == 1
        recorded = ok(
            run(
                env,
                "runs",
                "record",
                "acme/alice",
                "briefing",
                runs[0]["run_id"],
                "--outcome",
                "failed",
                "--reason",
                "reconciled",
            )
        )
        assert "recorded" in recorded
    # a second record of a terminal run is refused, exit 1
    again = run(env, "runs", "record", "acme/alice", "briefing", runs[0]["run_id"], "--outcome", "failed")
    assert again.exit_code == 1
    table = ok(run(env, "runs", "list", "acme/alice", "--routine", "briefing"))
    assert "briefing" in table


def test_plan_tick_reindex_stuck_erase_prune(
    env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if not env["ALMA_DATABASE_URL"].startswith("sqlite"):  # a production tick refuses memory:// (issue 45)
        env = {**env, "ALMA_BROKER_URL": request.getfixturevalue("redis_url")}
    migrate_store(env["ALMA_DATABASE_URL"])
    add_briefing(env, tmp_path)
    plan = json.loads(ok(run(env, "plan", "--at", "2099-01-01T09:00:00Z", "--json")))
    assert [d["routine_id"] for d in plan["due"]] == ["briefing"]
    report = json.loads(ok(run(env, "tick", "--in-process", "--json")))
    assert report["claimed"] == 0 and report["errors"] == 0
    assert "reindexed" in ok(run(env, "reindex"))
    assert json.loads(ok(run(env, "runs", "stuck", "--older-than", "1h", "--json"))) == []
    assert "erased" in ok(run(env, "runs", "erase", "acme/alice", "--yes"))
    assert "pruned 0" in ok(run(env, "runs", "prune", "--before", "2000-01-01T00:00:00Z"))


def test_tick_future_at_only_embedded(env: dict[str, str], tmp_path: Path) -> None:
    migrate_store(env["ALMA_DATABASE_URL"])
    add_briefing(env, tmp_path)
    result = run(env, "tick", "--at", "2099-01-01T09:00:00Z", "--in-process", "--json")
    if env["ALMA_DATABASE_URL"].startswith("sqlite"):
        report = json.loads(ok(result))
        assert report["claimed"] == 1
    else:
        assert result.exit_code == 1 and "embedded" in result.output


def test_error_paths(env: dict[str, str]) -> None:
    migrate_store(env["ALMA_DATABASE_URL"])
    bad = run(env, "routines", "add", "acme/alice", "r1", "--kind", "turn", "--schedule", '{"cron": "61 * * * *"}')
    assert bad.exit_code == 1 and "minute field '61' out of range 0-59" in bad.output
    assert "Traceback" not in bad.output
    unknown = run(env, "routines", "show", "acme/alice", "nope")
    assert unknown.exit_code == 1 and "nope" in unknown.output
    usage = run(env, "routines", "show", "acme/alice")
    assert usage.exit_code == 2
    scope = run(env, "routines", "list", "no-slash")
    assert scope.exit_code == 1 and "ORG/UID" in scope.output


def test_unknown_setting_is_named(tmp_path: Path) -> None:
    result = run({"ALMA_DATABSE_URL": "x"}, "routines", "list", "a/b")
    assert result.exit_code == 1 and "ALMA_DATABSE_URL" in result.output


def test_schedule_next_marks_dst() -> None:
    out = ok(
        run(
            {},
            "schedule",
            "next",
            '{"cron": "30 2 * * *", "tz": "America/New_York"}',
            "-n",
            "3",
            "--after",
            "2026-03-07T12:00:00Z",
            "--json",
        )
    )
    fires = json.loads(out)
    assert fires[0]["utc"] == "2026-03-08T07:00:00+00:00"  # 02:30 does not exist: the first instant after the gap
    assert fires[0]["note"]
    assert fires[1]["utc"] == "2026-03-09T06:30:00+00:00"


def test_schedule_next_of_a_solar_schedule_says_how_long_the_polar_night_is() -> None:
    sunrise = '{"solar": "sunrise", "lat": 78.2232, "lon": 15.6267, "tz": "Arctic/Longyearbyen"}'
    fires = json.loads(ok(run({}, "schedule", "next", sunrise, "-n", "2", "--after", "2026-11-20T00:00:00Z", "--json")))
    assert fires[0]["utc"].startswith("2027-02-1") and fires[0]["local"].endswith("+01:00")
    assert fires[0]["zone"] == "Arctic/Longyearbyen" and "days without one" in fires[0]["note"]
    assert fires[1]["note"] is None  # the day after has its sunrise too
    bad = run({}, "schedule", "next", '{"solar": "sunrize", "lat": 1, "lon": 2}')
    assert bad.exit_code == 1 and "did you mean 'sunrise'?" in bad.output


def _console(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    exe = Path(sys.executable).with_name("alma-schedule")
    return subprocess.run([str(exe), *args], env={**base, **env}, capture_output=True, text=True, timeout=120)


def test_unreachable_database_one_line_without_password() -> None:
    env = {"ALMA_DATABASE_URL": "postgresql+psycopg://alma:hunter2@127.0.0.1:1/nowhere"}
    proc = _console(["routines", "list", "acme/alice"], env)
    assert proc.returncode == 1
    assert "hunter2" not in proc.stderr + proc.stdout
    assert "127.0.0.1:1" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    debug = _console(["--debug", "routines", "list", "acme/alice"], env)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "hunter2" not in debug.stderr


def test_version_and_help_everywhere() -> None:
    assert ok(run({}, "--version")) == f"alma-schedule, version {importlib.metadata.version('alma-schedule')}\n"
    for args in (["routines", "add"], ["runs", "record"], ["plan"], ["tick"], ["demo"], ["schedule", "next"]):
        out = ok(run({}, *args, "--help"))
        assert "Example" in out, args


def test_tick_on_a_production_store_enqueues_one_tick(pg_url: str, redis_url: str) -> None:
    import redis

    migrate_store(pg_url)
    env = {"ALMA_DATABASE_URL": pg_url, "ALMA_BROKER_URL": redis_url}
    sent = json.loads(ok(run(env, "tick", "--json")))
    assert sent["task_id"]
    queued = redis.Redis.from_url(redis_url).lrange("alma.tick", 0, -1)
    assert len(queued) == 1
    message = json.loads(queued[0])
    assert message["headers"]["task"] == "alma_schedule.tick"
    assert message["headers"]["expires"]  # a tick piled up during an outage is discarded, not fired late


def test_jitter_is_shown_by_add_next_show_and_plan(env: dict[str, str], tmp_path: Path) -> None:
    migrate_store(env["ALMA_DATABASE_URL"])
    definition = tmp_path / "briefing.json"
    definition.write_text(json.dumps(DEFINITION))
    base = ["routines", "add", "acme/alice", "hourly", "--kind", "turn", "--definition", f"@{definition}"]
    refused = run(env, *base, "--schedule", '{"cron": "0,50 * * * *", "jitter": "10m"}')
    assert refused.exit_code == 1 and "'jitter' 10m" in refused.output and "(10m among the next 1000)" in refused.output
    ok(run(env, *base, "--schedule", '{"cron": "0 * * * *", "jitter": "30m"}'))
    nxt = json.loads(ok(run(env, "routines", "next", "acme/alice", "hourly", "-n", "24", "--json")))
    assert all(p["utc"] >= p["fire"] for p in nxt) and all(p["fire"].endswith(":00:00+00:00") for p in nxt)
    moved = [p for p in nxt if p["utc"] != p["fire"]]
    assert len(moved) >= 20 and all("jitter +" in p["note"] for p in moved)
    shown = json.loads(ok(run(env, "routines", "show", "acme/alice", "hourly", "--json")))
    assert shown["next_due_at"] == nxt[0]["utc"]
    plan = json.loads(ok(run(env, "plan", "--at", nxt[0]["utc"], "--json")))
    [due] = [d for d in plan["due"] if d["routine_id"] == "hourly"]
    assert (due["action"], due["due_at"], due["fire_at"]) == ("claim", nxt[0]["utc"], nxt[0]["fire"])
    early = json.loads(ok(run(env, "plan", "--at", moved[0]["fire"], "--json")))  # nominal passed, not due
    assert moved[0]["fire"].replace("+00:00", "Z") not in [d["run_id"] for d in early["due"]]
