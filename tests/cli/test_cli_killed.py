"""Issue 14, killed runs through the real click group on SQLite and PostgreSQL: a run Celery
reported lost (marked ``worker_lost`` / ``time_limit``) is in ``runs stuck`` BY DEFAULT, and a
running run started longer ago than the run task's hard limit says "past its hard limit" in the
note: information only (an unmarked old run is not listed for it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from alma_schedule.model import BlockedWhy, RunKey
from alma_schedule.stores import open_store
from tests.cli.test_cli_blocked import _running_named
from tests.cli.test_cli_rough_edges import add, env, ok, run

__all__ = ["env"]  # the fixture, shared with the rough edges


def _running(url: str, rid: str, now: datetime) -> RunKey:
    return _running_named(url, rid, rid, now)


def _mark(url: str, key: RunKey, why: BlockedWhy, now: datetime) -> None:
    store = open_store(url)
    try:
        assert store.mark_blocked(key, why=why, now=now)
    finally:
        store.close()


def test_a_lost_run_is_stuck_by_default_and_past_its_hard_limit_is_a_note(env: dict[str, str]) -> None:
    url = env["ALMA_DATABASE_URL"]
    now = datetime.now(UTC).replace(microsecond=0)
    for rid in ("old-lost", "new-limit", "old-quiet"):
        ok(add(env, rid))
    old = now - timedelta(minutes=5)  # past a 1 s limit + 30 s, not past the default 5 min + 30 s
    _mark(url, _running(url, "old-lost", old), BlockedWhy.WORKER_LOST, now)
    _mark(url, _running(url, "new-limit", now), BlockedWhy.TIME_LIMIT, now)
    _running(url, "old-quiet", old)  # past its hard limit, never reported: age alone lists nothing
    rows = json.loads(ok(run(env, "runs", "stuck", "--json")))  # the default limit: 5 min
    assert sorted((r["routine_id"], r["why"], r["note"]) for r in rows) == [
        ("new-limit", "time_limit", None),
        ("old-lost", "worker_lost", None),
    ]
    short = {**env, "ALMA_RUN_TIME_LIMIT": "1s"}
    rows = json.loads(ok(run(short, "runs", "stuck", "--older-than", "1h", "--json")))
    assert sorted((r["routine_id"], r["why"], r["note"]) for r in rows) == [
        ("new-limit", "time_limit", None),
        ("old-lost", "worker_lost", "past its hard limit"),
    ]
    table = ok(run(short, "runs", "stuck", "--older-than", "1h"))
    assert "past its hard limit" in table and "old-quiet" not in table
