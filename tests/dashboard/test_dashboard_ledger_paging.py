"""The ledger page pages on the store's own order, ``(fire_at, run_id, routine_id)`` (issue 45, item
13): routines of one scope sharing an instant across a page boundary are all shown, none twice."""

from __future__ import annotations

import html

from dashboard_support import auth, client

from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing.builders import HOUR, T0, TIMERS, fire_next_due, register

IDS = [f"q{n:02d}" for n in range(60)]  # more than a page (50), every one fired at T0


def _shown(page: str) -> set[str]:
    return {rid for rid in IDS if f">{rid}<" in page}


def test_routines_sharing_an_instant_straddle_a_page_and_every_one_is_shown_once() -> None:
    store = MemoryStore()
    for rid in IDS:
        register(store, rid, next_due_at=T0)
    assert len(store.claim_due(T0, 100, fire_next_due(HOUR), TIMERS).claimed) == len(IDS)  # one run id, 60 routines
    with client(store) as c:
        first = c.get("/dashboard/ledger?scope=org-a/user-1", headers=auth()).text
        assert "older runs" in first and len(_shown(first)) == 50
        href = html.unescape(first.split('<a href="')[-1].split('"')[0])
        assert "before_routine=" in href
        second = c.get(href, headers=auth()).text
    assert _shown(first) | _shown(second) == set(IDS) and not _shown(first) & _shown(second)
