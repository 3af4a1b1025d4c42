"""The overview's "did not run" section: a routine with ``expect`` whose fire no tick claimed is
listed (its id escaped), only to users whose scopes allow it; the gauge counts it."""

from __future__ import annotations

import html
from datetime import timedelta

from dashboard_support import HOSTILE, A, B, auth, client

from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing.builders import REGISTERED, T0, make_routine

EXPECT = {"every": "1m", "expect": "30s"}


def _store() -> MemoryStore:
    store = MemoryStore()
    store.put_routine(
        make_routine(HOSTILE, scope=A, schedule=EXPECT, next_due_at=T0 - timedelta(minutes=1)), now=REGISTERED
    )
    store.put_routine(
        make_routine("other-b", scope=B, schedule=EXPECT, next_due_at=T0 - timedelta(minutes=1)), now=REGISTERED
    )
    store.put_routine(make_routine("quiet", scope=A, next_due_at=T0 - timedelta(minutes=1)), now=REGISTERED)
    store.heartbeat(T0 - timedelta(seconds=30))
    return store


def test_the_overview_lists_the_overdue_fires_a_user_may_see_escaped() -> None:
    store = _store()
    with client(store) as c:  # org-a/* only
        page = c.get("/dashboard/", headers=auth()).text
        section = page.split("Overdue fires (expect: did not run)</h2>", 1)[1].split("<h2>", 1)[0]
        assert HOSTILE not in page and html.escape(f"org-a/user-1/{HOSTILE}") in section
        assert "2026-03-01T11:59:00Z" in section and "(never claimed)" in section
        assert "other-b" not in section and "quiet" not in section
    with client(store, dashboard_scopes="*") as fleet:
        page = fleet.get("/dashboard/", headers=auth()).text
        assert "org-b/user-2/other-b" in page
        metrics = fleet.get("/metrics", headers=auth()).text
        assert "\nalma_routines_overdue 2.0\n" in metrics
