"""The schedule policies at the CLI (issue 15): the ``finished`` reading in ``routines list`` / ``show``
(text and ``--json``), the refused trigger past ``not_after``, and previews inside the bounds."""

from __future__ import annotations

import json
from pathlib import Path

from alma_schedule.stores import migrate_store
from tests.cli import test_cli_commands as base

DEFINITION, ok, run = base.DEFINITION, base.ok, base.run
env = base.env  # the fixture: SQLite and PostgreSQL

PAST = "2020-01-01T00:00:00+00:00"
FUTURE = "2099-01-01T06:00:00+00:00"


def _add(env: dict[str, str], tmp_path: Path, routine_id: str, schedule: dict[str, object]) -> str:
    definition = tmp_path / "definition.json"
    definition.write_text(json.dumps(DEFINITION))
    return ok(
        run(
            env,
            "routines",
            "add",
            "acme/alice",
            routine_id,
            "--kind",
            "turn",
            "--schedule",
            json.dumps(schedule),
            "--definition",
            f"@{definition}",
        )
    )


def test_a_routine_past_not_after_reads_finished_and_refuses_a_trigger(
    env: dict[str, str], tmp_path: Path, redis_url: str
) -> None:
    migrate_store(env["ALMA_DATABASE_URL"])
    env = {**env, "ALMA_BROKER_URL": redis_url}  # a trigger on PostgreSQL would send
    _add(env, tmp_path, "ended", {"every": "1h", "not_after": PAST})
    _add(env, tmp_path, "live", {"every": "1h"})
    listed = {r["routine_id"]: r for r in json.loads(ok(run(env, "routines", "list", "acme/alice", "--json")))}
    assert (listed["ended"]["state"], listed["ended"]["finished"]) == ("finished", "not_after")
    assert listed["ended"]["next_due_at"] is None
    assert (listed["live"]["state"], listed["live"]["finished"]) == ("active", None)
    assert listed["live"]["schedule_claims"] == 0
    text = ok(run(env, "routines", "list", "acme/alice"))
    assert "finished (not_after)" in text
    shown = json.loads(ok(run(env, "routines", "show", "acme/alice", "ended", "--json")))
    assert shown["state"] == "finished" and shown["finished"] == "not_after"
    assert "finished (not_after)" in ok(run(env, "routines", "show", "acme/alice", "ended"))
    refused = run(env, "routines", "trigger", "acme/alice", "ended")
    assert refused.exit_code == 1 and "not_after" in refused.output and len(refused.output.strip().splitlines()) == 1
    runs = json.loads(ok(run(env, "runs", "list", "acme/alice", "--json")))
    assert runs == [], "the refused trigger wrote nothing"


def test_previews_stop_at_the_bounds_and_at_max_runs(env: dict[str, str], tmp_path: Path) -> None:
    migrate_store(env["ALMA_DATABASE_URL"])
    bounded = {"cron": "0 * * * *", "not_before": "2098-12-31T22:30:00+00:00", "not_after": FUTURE}
    out = _add(env, tmp_path, "bounded", bounded)
    assert "2098-12-31T23:00:00+00:00" in out and "2098-12-31T22:00:00" not in out
    nxt = json.loads(ok(run(env, "routines", "next", "acme/alice", "bounded", "-n", "50", "--json")))
    expected = ["2098-12-31T23:00:00+00:00"] + [f"2099-01-01T0{h}:00:00+00:00" for h in range(7)]
    assert [p["utc"] for p in nxt] == expected, "from the first fire at or after not_before to not_after, inclusive"
    _add(env, tmp_path, "limited", {"every": "1h", "max_runs": 2})
    assert len(json.loads(ok(run(env, "routines", "next", "acme/alice", "limited", "-n", "10", "--json")))) == 2
    preview = json.loads(ok(run(env, "schedule", "next", json.dumps(bounded), "-n", "3", "--json")))
    assert [p["utc"] for p in preview] == [
        "2098-12-31T23:00:00+00:00",
        "2099-01-01T00:00:00+00:00",
        "2099-01-01T01:00:00+00:00",
    ]
