"""Issue 14, the blocked marker and the money of ``runs record`` through the real click group on
SQLite and PostgreSQL: a running run marked blocked at once is in ``runs stuck`` BY DEFAULT (no
``--older-than``, whatever its age) with its why."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from alma_schedule.model import BlockedWhy, RunKey, Scope
from alma_schedule.stores import open_store
from tests.cli.test_cli_rough_edges import SCOPE, add, env, ok, run

__all__ = ["env"]  # the fixture, shared with the rough edges


def _running(url: str, rid: str, now: datetime) -> RunKey:
    store = open_store(url)
    try:
        key = RunKey.of(Scope.parse(SCOPE), rid, f"manual:{rid}")
        later = now + timedelta(hours=1)
        assert store.claim_manual(key, now=now, expires_at=later, resend_at=later).won
        assert store.start(key, now=now).won
        return key
    finally:
        store.close()


def _mark(url: str, key: RunKey, now: datetime, cost: int | None = None) -> None:
    store = open_store(url)
    try:
        assert store.mark_blocked(key, why=BlockedWhy.UNCERTAIN_OUTCOME, now=now, cost_micros=cost)
    finally:
        store.close()


def test_a_marked_run_is_stuck_at_once_by_default_with_its_why(env: dict[str, str]) -> None:
    url = env["ALMA_DATABASE_URL"]
    now = datetime.now(UTC).replace(microsecond=0)
    ok(add(env, "fresh"))
    ok(add(env, "marked"))
    _running(url, "fresh", now)
    marked = _running(url, "marked", now)
    assert json.loads(ok(run(env, "runs", "stuck", "--json"))) == []  # seconds old: nothing yet
    _mark(url, marked, now, cost=2_500)
    rows = json.loads(ok(run(env, "runs", "stuck", "--json")))
    assert [(r["routine_id"], r["state"], r["why"], r["cost_micros"]) for r in rows] == [
        ("marked", "running", "uncertain_outcome", 2_500)
    ]
    assert rows[0]["blocked_why"] == "uncertain_outcome" and rows[0]["blocked_at"] == now.isoformat()
    # whatever --older-than says
    assert [r["routine_id"] for r in json.loads(ok(run(env, "runs", "stuck", "--older-than", "30d", "--json")))] == [
        "marked"
    ]
    table = ok(run(env, "runs", "stuck"))
    assert "acme/alice/marked" in table and "uncertain_outcome" in table and "fresh" not in table
