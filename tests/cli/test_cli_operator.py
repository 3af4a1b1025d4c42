"""The operator's commands of issue 15 through the real click group, on SQLite and PostgreSQL:
``routines backfill`` (and ``--cancel``), ``routines describe``, ``routines list --all``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from test_cli_commands import DEFINITION, env, ok, run  # noqa: F401 - env is the shared fixture

from alma_schedule.engine import create_schedule
from alma_schedule.model import RoutineSpec, RunResult, SettableTime
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store


class _Quiet:
    def validate(self, routine: Any) -> None:
        return None

    def run(self, routine: Any, handle: Any) -> RunResult:
        return RunResult.completed("ok")


def _late_routine(url: str) -> datetime:
    """``acme/alice/briefing`` (kind turn), hourly, registered 10 h ago: one tick ran only its latest fire."""
    registered = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=10, seconds=1)
    store = open_store(url)
    try:
        clock = SettableTime(registered)
        sched = create_schedule(store=store, runner=_Quiet(), settings=Settings(clock=clock))
        sched.register(RoutineSpec("acme", "alice", "briefing", "turn", {"every": "1h"}, DEFINITION))
        sched.register(RoutineSpec("acme", "bob", "other", "job", {"every": "1h"}, {}))
        clock.set(registered + timedelta(hours=10))
        assert len(sched.tick().claimed) == 2
    finally:
        store.close()
    return registered


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_backfill_describe_and_cancel(env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    migrate_store(env["ALMA_DATABASE_URL"])
    registered = _late_routine(env["ALMA_DATABASE_URL"])
    start, end = _iso(registered + timedelta(hours=1)), _iso(registered + timedelta(hours=10))
    future = run(env, "routines", "backfill", "acme/alice", "briefing", "--from", start, "--to", "2999-01-01T00:00:00Z")
    assert future.exit_code == 1 and "in the future" in future.output and len(future.output.splitlines()) == 1
    over = run(env, "routines", "backfill", "acme/alice", "briefing", "--from", start, "--to", end, "--max", "3")
    assert over.exit_code == 1 and "10 fires, over --max 3" in over.output
    missing = run(env, "routines", "backfill", "acme/alice", "briefing", "--from", start)
    assert missing.exit_code == 1 and "--to" in missing.output
    out = ok(run(env, "routines", "backfill", "acme/alice", "briefing", "--from", start, "--to", end))
    assert "9 fire(s) to run" in out and "1 already have a run row" in out

    view = json.loads(ok(run(env, "routines", "describe", "acme/alice", "briefing", "--json")))
    assert (view["state"], view["streak"], view["erroring"]) == ("enabled", 0, False)
    assert view["policies"]["overlap"] == "skip" and view["schedule"] == {"every": "1h"}
    assert view["backfill"]["pending"] and view["backfill"]["max_fires"] == 1000
    assert len(view["next_fires"]) == 5 and view["blocking"] is None
    assert [r["origin"] for r in view["recent_runs"]] == ["schedule"]
    assert view["recent_runs"][0]["state"] == "completed" and view["recent_runs"][0]["duration_s"] is not None

    if env["ALMA_DATABASE_URL"].startswith("sqlite"):  # embedded: the tick runs the fire in-process
        report = json.loads(ok(run(env, "tick", "--in-process", "--json")))
        assert report["claimed"] == 1
        runs = json.loads(ok(run(env, "runs", "list", "acme/alice", "--json")))
        backfilled = [r for r in runs if r["origin"] == "backfill"]
        assert [(r["run_id"], r["state"]) for r in backfilled] == [(_iso(registered + timedelta(hours=1)), "completed")]
    text = ok(run(env, "routines", "describe", "acme/alice", "briefing"))
    assert "next fires" in text and "last runs" in text and "pending, next" in text

    cancelled = ok(run(env, "routines", "backfill", "acme/alice", "briefing", "--cancel"))
    assert "cancelled the backfill of acme/alice/briefing" in cancelled
    after = json.loads(ok(run(env, "routines", "describe", "acme/alice", "briefing", "--json")))
    assert after["backfill"]["pending"] is False and after["backfill"]["cancelled_at"] is not None
    unknown = run(env, "routines", "describe", "acme/alice", "nope")
    assert unknown.exit_code == 1 and "not found: routine acme/alice/nope" in unknown.output


def test_list_all_filters_and_counts_per_scope(env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    migrate_store(env["ALMA_DATABASE_URL"])
    _late_routine(env["ALMA_DATABASE_URL"])
    ok(run(env, "routines", "pause", "acme/bob", "other", "--reason", "maintenance"))
    listed = json.loads(ok(run(env, "routines", "list", "--all", "--json")))
    assert [(r["org"], r["uid"], r["routine_id"]) for r in listed["routines"]] == [
        ("acme", "alice", "briefing"),
        ("acme", "bob", "other"),
    ]
    assert listed["counts"] == [{"org": "acme", "uid": "alice", "count": 1}, {"org": "acme", "uid": "bob", "count": 1}]
    assert (listed["total"], listed["truncated"]) == (2, False)
    paused = json.loads(ok(run(env, "routines", "list", "--all", "--state", "paused", "--json")))
    assert [r["routine_id"] for r in paused["routines"]] == ["other"]
    turn = json.loads(ok(run(env, "routines", "list", "--all", "--kind", "turn", "--json")))
    assert [r["routine_id"] for r in turn["routines"]] == ["briefing"]
    first = json.loads(ok(run(env, "routines", "list", "--all", "--limit", "1", "--json")))
    assert (len(first["routines"]), first["total"], first["truncated"]) == (1, 2, True)
    table = ok(run(env, "routines", "list", "--all"))
    assert "per scope (2 in all)" in table and "acme/bob" in table
    mine = json.loads(ok(run(env, "routines", "list", "acme/bob", "--state", "paused", "--json")))
    assert [r["routine_id"] for r in mine] == ["other"]
    bad = run(env, "routines", "list", "--all", "--state", "sleeping")
    assert bad.exit_code == 2
    neither = run(env, "routines", "list")
    assert neither.exit_code == 1 and "--all" in neither.output
    both = run(env, "routines", "list", "acme/bob", "--all")
    assert both.exit_code == 1
