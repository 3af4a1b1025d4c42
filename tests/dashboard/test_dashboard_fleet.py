"""The fleet pages (issue 51): a ``*`` user lists every scope and routine without typing a scope,
a scoped user the same over their scopes only; filters, keyset paging, and the read budget (at most
20 pages of rows per listing, "narrow the filter" past it) measured on the store's own reads."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

from dashboard_support import HOSTILE, A, B, auth, client, seeded_store

from alma_schedule.dashboard.fleet import BUDGET, PAGE
from alma_schedule.model import RunResult, Scope
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing.builders import HOUR, REGISTERED, T0, TIMERS, fire_next_due, make_routine, run_in

EVIL = Scope("<b>org", '"uid&')


class CountingStore(MemoryStore):
    """A memory store that counts the rows each fleet read returns (what a SQL store reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, int] = {"routines": 0, "runs": 0}

    def fleet_routines(self, **kw: Any) -> Any:
        found = super().fleet_routines(**kw)
        self.rows["routines"] += len(found)
        return found

    def list_runs(self, scope: Scope, **kw: Any) -> Any:
        found = super().list_runs(scope, **kw)
        self.rows["runs"] += len(found)
        return found


def _next(page: str, text: str) -> str:
    found = re.search(r'<a href="([^"]+)">' + re.escape(text) + "</a>", page)
    assert found, f"no {text!r} link"
    return html.unescape(found.group(1))


def test_a_fleet_user_lists_every_scope_and_routine_without_typing_a_scope() -> None:
    store = seeded_store()
    store.put_routine(make_routine("r-evil", scope=EVIL), now=REGISTERED)
    failed = run_in(store, "running", "flaky", now=T0 - timedelta(hours=1))
    store.finish(failed.key, RunResult.failed("provider_error"), now=T0 - timedelta(hours=1), timers=TIMERS)
    with client(store, dashboard_scopes="*") as c:
        scopes = c.get("/dashboard/scopes", headers=auth()).text
        assert '<a href="/dashboard/scopes">Scopes</a>' in scopes
        for sc in (A, B):
            assert f'<a href="/dashboard/routines?scope={sc.org}%2F{sc.uid}">{sc}</a>' in scopes
        assert "&lt;b&gt;org/&quot;uid&amp;" in scopes and "<b>org" not in scopes  # escaped
        assert "/dashboard/ledger?scope=org-a%2Fuser-1&amp;state=failed&amp;since=" in scopes
        every = c.get("/dashboard/routines", headers=auth()).text
        for rid in ("r1", "daily", "secret-b", "r-evil"):
            assert f">{rid}<" in every
        assert HOSTILE not in every and html.escape(HOSTILE) in every
        by_kind = c.get("/dashboard/routines?kind=other", headers=auth()).text
        assert ">daily<" in by_kind and ">r1<" not in by_kind
        by_prefix = c.get("/dashboard/routines?prefix=secret", headers=auth()).text
        assert ">secret-b<" in by_prefix and ">r1<" not in by_prefix
        in_scope = c.get("/dashboard/routines?scope=org-a/user-1&prefix=da", headers=auth()).text
        assert ">daily<" in in_scope and ">r1<" not in in_scope
        ledger = c.get("/dashboard/ledger?state=failed", headers=auth()).text
        assert "<td>org-a/user-1</td>" in ledger and "provider_error" in ledger
        bad = c.get("/dashboard/routines?state=sleepy", headers=auth())
        assert bad.status_code == 400 and "state &#x27;sleepy&#x27; is not one of" in bad.text


def test_a_scoped_user_sees_their_scopes_only_whatever_the_cursor_says() -> None:
    store = seeded_store()
    with client(store) as c:  # org-a/*
        for path in (
            "/dashboard/routines",
            "/dashboard/scopes",
            "/dashboard/ledger",
            "/dashboard/routines?after_org=org-a&after_uid=zzz&after_id=z",
            "/dashboard/ledger?before_org=org-b&before_uid=user-2&before_at=2030-01-01T00:00:00Z&before_run=x",
            "/dashboard/scopes?after_org=org-a&after_uid=user-1",
        ):
            got = c.get(path, headers=auth())
            assert got.status_code == 200 and "secret-b" not in got.text and "org-b" not in got.text, path
        assert ">r1<" in c.get("/dashboard/routines", headers=auth()).text


def test_routines_page_through_the_fleet_by_key_each_once() -> None:
    store = MemoryStore()
    ids = [f"p{n:03d}" for n in range(70)]
    for sc in (A, B):
        for rid in ids:
            store.put_routine(make_routine(rid, scope=sc), now=REGISTERED)
    seen: list[str] = []
    with client(store, dashboard_scopes="*") as c:
        href = "/dashboard/routines"
        for _ in range(5):
            page = c.get(href, headers=auth()).text
            rows = re.findall(r'<tr><td><a href="[^"]+">([^<]+)</a></td><td><a href="[^"]+">([^<]+)</a>', page)
            assert len(rows) <= PAGE
            seen += [f"{sc}/{rid}" for sc, rid in rows]
            if "next page" not in page:
                break
            href = _next(page, "next page")
    assert seen == [f"{sc}/{rid}" for sc in (A, B) for rid in ids]


def test_a_filter_no_index_serves_stops_at_the_budget_and_says_narrow_the_filter() -> None:
    store = CountingStore()
    for n in range(BUDGET + 300):
        store.put_routine(make_routine(f"x{n:05d}", scope=A), now=REGISTERED)
    with client(store, dashboard_scopes="*") as c:
        store.rows["routines"] = 0
        page = c.get("/dashboard/routines?kind=nothing", headers=auth()).text
        assert "narrow the filter" in page and store.rows["routines"] == BUDGET
        store.rows["routines"] = 0
        rest = c.get(_next(page, "read the next rows"), headers=auth()).text
        assert "no routine" in rest and "narrow the filter" not in rest and store.rows["routines"] == 300
        store.rows["routines"] = 0
        served = c.get("/dashboard/routines?scope=org-a/user-1&prefix=x0120", headers=auth()).text
        assert served.count(">x0120") == 10 and store.rows["routines"] <= PAGE + 1  # one read of the prefix range


def test_the_ledger_pages_across_scopes_within_its_budget() -> None:
    store = CountingStore()
    for sc in (A, B):
        for n in range(40):
            store.put_routine(make_routine(f"q{n:02d}", scope=sc, next_due_at=T0), now=REGISTERED)
    assert len(store.claim_due(T0, 100, fire_next_due(HOUR), TIMERS).claimed) == 80
    shown: list[str] = []
    with client(store, dashboard_scopes="*") as c:
        href = "/dashboard/ledger"
        while True:
            store.rows["runs"] = 0
            page = c.get(href, headers=auth()).text
            assert store.rows["runs"] <= BUDGET
            shown += re.findall(r"<td>(org-[ab]/user-[12])</td><td><a href=\"[^\"]+\">(q\d\d)</a>", page)
            if "older runs" not in page:
                break
            href = _next(page, "older runs")
        store.rows["runs"] = 0
        stopped = c.get("/dashboard/ledger?reason=nothing", headers=auth()).text
        assert "no run" in stopped and store.rows["runs"] == 80
    assert len(shown) == 80 and len(set(shown)) == 80
    assert [s for s, _ in shown] == ["org-a/user-1"] * 40 + ["org-b/user-2"] * 40


def test_the_scopes_page_reads_at_most_the_budget_and_says_at_least() -> None:
    from alma_schedule.dashboard.views_fleet import SCOPE_ROWS, SCOPES_PAGE

    store = CountingStore()
    for n in range(SCOPE_ROWS + 5):
        store.put_routine(make_routine(f"big{n:03d}", scope=A), now=REGISTERED)
    for n in range(SCOPES_PAGE + 3):
        store.put_routine(make_routine("one", scope=Scope("org-c", f"user-{n:02d}")), now=REGISTERED)
    with client(store, dashboard_scopes="*") as c:
        store.rows = {"routines": 0, "runs": 0}
        page = c.get("/dashboard/scopes", headers=auth()).text
        assert store.rows["routines"] <= BUDGET and store.rows["runs"] <= BUDGET
        assert f">{SCOPE_ROWS}+</a>" in page  # org-a/user-1's enabled routines: at least 50
        assert "org-c/user-18" in page and "org-c/user-19" not in page  # 20 scopes a page
        rest = c.get(_next(page, "next scopes"), headers=auth()).text
        assert "org-c/user-19" in rest and "org-c/user-22" in rest and "org-c/user-18" not in rest
