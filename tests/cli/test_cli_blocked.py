"""Issue 14, the blocked marker and the money of ``runs record`` through the real click group on
SQLite and PostgreSQL: a running run marked blocked at once is in ``runs stuck`` BY DEFAULT (no
``--older-than``, whatever its age) with its why; ``runs record --cost-usd X`` settles at X, without
it at the stored cost (the bound, for an uncertain run), and a malformed amount is refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from alma_schedule.engine.handle import money_day
from alma_schedule.model import BlockedWhy, Ceiling, RunKey, Scope
from alma_schedule.stores import open_store
from tests.cli.test_cli_rough_edges import SCOPE, add, env, fails, ok, run

__all__ = ["env"]  # the fixture, shared with the rough edges

DAY = money_day(datetime.now(UTC), "UTC")


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
    _running_named(url, "fresh", "fresh", now)
    marked = _running_named(url, "marked", "marked", now)
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


# ---------------------------------------------------------------- runs record --cost-usd

BOUND = 4_000
LIMIT = 8_000  # the org's daily ceiling (micro-USD): two bounds fit
ORG_CEILING = Ceiling.org_key(SCOPE.split("/")[0])


def _reserved_run(url: str, rid: str, name: str, now: datetime, *, receipt: int | None) -> RunKey:
    """A running run holding ``BOUND`` against the org's ceiling: with a receipt (cost written),
    or uncertain (blocked, its cost the bound)."""
    key = _running_named(url, rid, name, now)
    store = open_store(url)
    try:
        assert store.reserve(key, DAY, BOUND, [Ceiling(ORG_CEILING, LIMIT)]).ok
        if receipt is not None:
            store.annotate(key, {"cost_micros": receipt})
        else:
            assert store.mark_blocked(key, why=BlockedWhy.UNCERTAIN_OUTCOME, now=now, cost_micros=BOUND)
        return key
    finally:
        store.close()


def _running_named(url: str, rid: str, name: str, now: datetime) -> RunKey:
    store = open_store(url)
    try:
        key = RunKey.of(Scope.parse(SCOPE), rid, f"manual:{name}")
        later = now + timedelta(hours=1)
        assert store.claim_manual(key, now=now, expires_at=later, resend_at=later).won
        assert store.start(key, now=now).won
        return key
    finally:
        store.close()


def _spend(url: str) -> int:
    store = open_store(url)
    try:
        return store.spend(ORG_CEILING, DAY)
    finally:
        store.close()


def _record(env: dict[str, str], key: RunKey, *extra: str) -> Any:
    return run(env, "runs", "record", SCOPE, key.routine_id, key.run_id,
               "--outcome", "failed", "--reason", "provider_error", *extra)  # fmt: skip


def test_record_settles_at_the_cost_given_and_the_ceiling_sees_what_was_billed(env: dict[str, str]) -> None:
    """The issue's scenario: two runs of one org billed 3,500 and 2,600 µ$ under an 8,000 µ$ ceiling;
    one wrote its receipt, the other's outcome was uncertain (0.1.0 stored 0 for it, and ``runs
    record`` had no way to say what was billed: the ceiling saw less than the provider billed)."""
    url = env["ALMA_DATABASE_URL"]
    now = datetime.now(UTC).replace(microsecond=0)
    ok(add(env, "briefing"))
    ok(add(env, "digest"))
    first = _reserved_run(url, "briefing", "first", now, receipt=3_500)
    second = _reserved_run(url, "digest", "second", now, receipt=None)
    assert _spend(url) == 2 * BOUND
    out = ok(_record(env, first))  # no --cost-usd: the stored cost, the receipt's
    assert out == f"recorded {SCOPE}/briefing/{first.run_id} as failed (provider_error), settled at 3500 µ$\n"
    done = json.loads(ok(_record(env, second, "--cost-usd", "0.0026", "--json")))
    assert done["won"] and (done["record"]["cost_micros"], done["record"]["reserved_micros"]) == (2_600, 0)
    assert _spend(url) == 3_500 + 2_600  # exactly what the provider billed
    third = _running_named(url, "briefing", "third", now)
    store = open_store(url)
    try:  # the ceiling counts it: the next bound no longer fits the day
        assert not store.reserve(third, DAY, BOUND, [Ceiling(ORG_CEILING, LIMIT)]).ok
    finally:
        store.close()


def test_record_without_a_cost_settles_an_uncertain_run_at_its_bound(env: dict[str, str]) -> None:
    url = env["ALMA_DATABASE_URL"]
    ok(add(env, "digest"))
    key = _reserved_run(url, "digest", "only", datetime.now(UTC).replace(microsecond=0), receipt=None)
    ok(_record(env, key))
    assert _spend(url) == BOUND  # never 0 for an uncertain run


@pytest.mark.parametrize("bad", ["-0.01", "abc", "0.0000001", "nan", "inf", "", "1,5"])
def test_a_malformed_cost_is_refused_naming_the_option_and_nothing_is_recorded(env: dict[str, str], bad: str) -> None:
    url = env["ALMA_DATABASE_URL"]
    ok(add(env, "digest"))
    key = _reserved_run(url, "digest", "only", datetime.now(UTC).replace(microsecond=0), receipt=None)
    line = fails(_record(env, key, "--cost-usd", bad))
    assert "--cost-usd" in line
    store = open_store(url)
    try:
        rec = store.get(key)
        assert rec is not None and (rec.state, rec.reserved_micros) == ("running", BOUND)
    finally:
        store.close()
