"""``alma-schedule runs overdue [--json]`` through the real click group on SQLite and PostgreSQL: a
routine with ``expect`` whose fire no tick claimed is listed (never claimed), one without is not; a
bad ``expect`` is one line naming the field, nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.cli.test_cli_rough_edges import add, add_at, env, fails, ok, run

__all__ = ["env"]  # the fixture, shared with the rough edges

EXPECT = '{"every": "1m", "expect": "30s"}'


def test_a_fire_no_tick_claimed_is_listed_overdue(env: dict[str, str]) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=3)).replace(microsecond=0)
    add_at(env, "watched", EXPECT, past.isoformat())
    add_at(env, "quiet", '{"every": "1m"}', past.isoformat())
    rows = json.loads(ok(run(env, "runs", "overdue", "--json")))
    assert [(r["routine_id"], r["run_id"], r["state"], r["delivered_at"]) for r in rows] == [
        ("watched", None, None, None)
    ]
    (row,) = rows
    fire = datetime.fromisoformat(row["fire_at"])
    assert datetime.fromisoformat(row["overdue_since"]) == fire + timedelta(seconds=30)
    assert row["key"] == f"acme/alice/watched/{fire.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    table = ok(run(env, "runs", "overdue"))
    assert "acme/alice/watched" in table and "(never claimed)" in table and "quiet" not in table


def test_an_expect_longer_than_the_interval_is_refused_naming_the_field(env: dict[str, str]) -> None:
    line = fails(add(env, "bad", '{"every": "1m", "expect": "2m"}'))
    assert "'expect' 2m is longer than the schedule's interval (1m)" in line
    assert json.loads(ok(run(env, "routines", "list", "acme/alice", "--json"))) == []
    assert ok(run(env, "runs", "overdue")).strip() == "overdue fires (expect): none"
