"""The fleet pages and the charts with hypothesis-made ids and reasons (issue 51, the escaping test of
the first dashboard issue extended): no markup, control or bidi character of the store's reaches the
Scopes, fleet Routines and Ledger pages or an SVG title raw, for a ``*`` user and a scoped one."""

from __future__ import annotations

import contextlib
import re

from hypothesis import HealthCheck, given, settings

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Scope
from alma_schedule.testing.builders import REGISTERED, make_routine
from tests.dashboard.dashboard_support import auth, client
from tests.hostile.test_dashboard_hostile import IDS, REASONS, raw_unsafe, seeded

FLEET_PAGES = ("/dashboard/", "/dashboard/scopes", "/dashboard/routines", "/dashboard/ledger")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rid=IDS, reason=REASONS)
def test_no_fleet_page_carries_store_text_raw(rid: str, reason: str) -> None:
    store = seeded(rid, reason)
    with contextlib.suppress(InvalidInput):  # a hostile uid too, when a uid may hold it (never a "/")
        store.put_routine(make_routine(rid, scope=Scope("org-b", rid)), now=REGISTERED)
    for scopes in ("*", "org-a/*"):
        with client(store, dashboard_scopes=scopes) as c:
            shown = [c.get(path, headers=auth()) for path in FLEET_PAGES]
            shown.append(c.get("/dashboard/routine", params={"scope": "org-a/user-1", "id": rid}, headers=auth()))
            for answer in shown:
                assert answer.status_code == 200, answer.text[:300]
                page = answer.text
                assert raw_unsafe(page) == []
                tags = re.findall(r"<[a-zA-Z/!][^>]*>", page)
                for text in (rid, reason):
                    if "<" in text:
                        assert all(text not in tag for tag in tags)
                        assert text not in page
