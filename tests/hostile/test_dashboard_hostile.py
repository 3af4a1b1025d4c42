"""Every dashboard page with hypothesis-made ids and reasons: no markup, control or bidi character of
the store's reaches a page raw (issue 45, items 3, 4 and 6 on the HTML medium).

The ONE escape of the medium is :mod:`alma_schedule.dashboard.html` (``esc`` for shown text, ``attr``
for a form value sent back). The ids are drawn from the characters that break pages and terminals:
markup, quotes, ampersands, C0 and C1 controls, bidi overrides, zero-width and line separators;
they are written into a real memory store as a row stored before today's id check could be (ids now
refuse Cc and Cf, so such rows are the old ones), with a paused reason and a run error alike."""

from __future__ import annotations

import re
import unicodedata
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from alma_schedule.errors import InvalidInput
from alma_schedule.model import RunResult, check_id
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing.builders import REGISTERED, T0, TIMERS, make_routine, run_in
from tests.dashboard.dashboard_support import A, auth, client, csrf_of

SCOPE = str(A)
#: What no page may carry raw: controls (but the newline), format characters, separators.
UNSAFE = ("Cc", "Cf", "Cs", "Zl", "Zp")
CONTROLS = ["\x1b", "\x07", "\x00", "\r", "\x7f", "\u009b", "\u009d"]
FORMATS = ["\u202e", "\u2066", "\u200b", "\u2028", "\ufeff", "\U000e0041"]
HOSTILE_CHARS = st.sampled_from([*"<>&\"'`=/[]{}; ", *CONTROLS, *FORMATS])
TEXTS = st.text(alphabet=st.one_of(HOSTILE_CHARS, st.characters(codec="utf-8")), min_size=1, max_size=24)


def storable(rid: str) -> bool:
    """Ids a store still holds (lookups keep the lenient rule: a row stored before the strict one)."""
    try:
        for suffix in ("", "-p", "-s"):
            check_id("routine_id", rid + suffix)
    except InvalidInput:
        return False
    return True


IDS = TEXTS.filter(storable)
REASONS = TEXTS.filter(lambda s: "\x00" not in s)  # the one character no store holds in text


def raw_unsafe(page: str) -> list[str]:
    return [f"U+{ord(c):04X}" for c in page if c != "\n" and unicodedata.category(c) in UNSAFE]


def seeded(rid: str, reason: str) -> MemoryStore:
    store = MemoryStore()
    paused = make_routine(rid + "-p", scope=A, paused_reason=reason)
    store.put_routine(paused, now=REGISTERED)
    stuck = run_in(store, "running", rid + "-s", now=T0 - timedelta(days=1))
    failed = run_in(store, "running", rid, now=T0 - timedelta(hours=2))
    result = RunResult.failed("provider_error", error_class=reason)
    assert store.finish(failed.key, result, now=T0 - timedelta(hours=2), timers=TIMERS).won
    assert stuck.run_id
    return store


def pages(c: TestClient, rid: str) -> dict[str, str]:
    """Every page that shows a routine, its runs or a confirmation for it (each must answer 200)."""
    q = {"scope": SCOPE, "id": rid}
    act = {"scope": SCOPE, "routine": rid}
    got = {
        "overview": c.get("/dashboard/", params={"scope": SCOPE}, headers=auth()),
        "routines": c.get("/dashboard/routines", params={"scope": SCOPE}, headers=auth()),
        "routine": c.get("/dashboard/routine", params=q, headers=auth()),
        "paused routine": c.get("/dashboard/routine", params={"scope": SCOPE, "id": rid + "-p"}, headers=auth()),
        "ledger": c.get("/dashboard/ledger", params={"scope": SCOPE}, headers=auth()),
        "stuck": c.get("/dashboard/stuck", params={"scope": SCOPE}, headers=auth()),
        "confirm pause": c.get("/dashboard/act/pause", params=act, headers=auth()),
        "confirm trigger": c.get("/dashboard/act/trigger", params=act, headers=auth()),
    }
    for name, response in got.items():
        assert response.status_code == 200, (name, response.status_code, response.text[:300])
    return {name: response.text for name, response in got.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rid=IDS, reason=REASONS)
def test_no_page_carries_store_text_raw(rid: str, reason: str) -> None:
    with client(seeded(rid, reason)) as c:
        for name, page in pages(c, rid).items():
            assert raw_unsafe(page) == [], name
            tags = re.findall(r"<[a-zA-Z/!][^>]*>", page)
            for text in (rid, reason):  # markup of the store's never opens a tag of its own
                if "<" in text:
                    assert all(text not in tag for tag in tags), name
                    assert text not in page, name


def test_a_bidi_id_is_shown_escaped_and_acted_on_exactly() -> None:
    rid = "invoice\u202egnp.exe\u2028x"
    with client(seeded(rid, "[green]ok")) as c:
        shown = pages(c, rid)
        assert "invoice\\u202egnp.exe\\u2028x" in shown["routines"]
        token = csrf_of(shown["confirm pause"])
        done = c.post(
            "/dashboard/act/pause",
            params={"scope": SCOPE, "routine": rid},
            data={"csrf": token, "reason": "operator"},
            headers=auth(),
        )
        assert done.status_code == 200 and raw_unsafe(done.text) == [], done.text[:300]
        after = c.get("/dashboard/routine", params={"scope": SCOPE, "id": rid}, headers=auth()).text
        assert "paused" in after and raw_unsafe(after) == []
