"""The dashboard's SVG charts (issue 51): each mark counted against the data behind it, units in
milliseconds, a title and a table for each, every stored text escaped; the next 24 h computed with
the tick's functions from a bounded sample, the DST night named; a paused routine says what it will
do instead of listing fires that will not happen."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from dashboard_support import HOSTILE, A, B, auth, client, csrf_of

from alma_schedule.core import next_fires, parse_schedule
from alma_schedule.dashboard import nextday
from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.charts import Minute, clock_health, duration_text, lag_ms
from alma_schedule.model import RunResult
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing.builders import HOUR, REGISTERED, T0, TIMERS, fire_next_due, make_routine

#: 2027-03-28 01:00 UTC: Europe/Lisbon moves from +00:00 to +01:00, inside the 24 h from NOW.
NOW = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)
LISBON_2AM = {"cron": "0 2 * * *", "tz": "Europe/Lisbon"}
QUARTER = {"cron": "*/15 * * * *"}


def _count(page: str, cls: str) -> int:
    return len(re.findall(rf'class="{cls}[" ]', page))


def test_clock_health_draws_one_bar_per_logged_minute_the_lags_in_ms_and_each_gap() -> None:
    now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    minutes = [
        Minute(now - timedelta(minutes=m), 2, m % 3, 0.0075496 if m % 2 else None, 0.2 if m % 3 else None)
        for m in range(0, 600)
        if not 100 <= m < 130 and not 300 <= m < 302
    ]
    svg = clock_health(minutes, now)
    assert "<svg" in svg and "<title>Clock health, the 24 h to 12:00 UTC" in svg and "<table>" in svg
    assert _count(svg, "tick") == len(minutes)
    assert _count(svg, "claimed") == sum(1 for m in minutes if m.claimed)
    p50 = re.search(r'class="p50" points="([^"]*)"', svg)
    assert p50 and len(p50.group(1).split()) == sum(1 for m in minutes if m.p50 is not None)
    assert _count(svg, "gap") == 3  # the two holes and everything before the first minute logged
    assert "8 ms" in svg and "0.0075" not in svg and "200 ms" in svg
    assert (lag_ms(7.549592), duration_text(0.85), duration_text(12.34)) == ("7,550 ms", "850 ms", "12.3 s")


def test_the_next_24_h_counts_the_fires_the_tick_would_and_names_the_dst_night_and_the_top_minutes() -> None:
    store = MemoryStore()
    for n in range(30):
        store.put_routine(make_routine(f"l{n:02d}", scope=A, schedule=LISBON_2AM, registered_at=NOW), now=NOW)
    for n in range(3):
        store.put_routine(make_routine(f"q{n}", scope=B, schedule=QUARTER, registered_at=NOW), now=NOW)
    store.put_routine(make_routine("zz-paused", scope=B, schedule=QUARTER, paused_reason="x"), now=NOW)
    day = nextday.next_day(store, Access(None, False), None, NOW)
    expected: dict[datetime, int] = {}
    for schedule, n in ((LISBON_2AM, 30), (QUARTER, 3)):
        for f in next_fires(parse_schedule(schedule), NOW, NOW - timedelta(microseconds=1), 200):
            if f < NOW + timedelta(days=1):
                expected[f] = expected.get(f, 0) + n
    assert day.fires == sum(expected.values()) == 30 + 3 * 96 and day.read == 34 and day.active == 33
    html = nextday.next_day_chart(day, "the whole fleet")
    assert _count(html, "fire") == len(expected)  # one cell per minute holding a fire
    assert "DST Europe/Lisbon 01:00 UTC: 01:00 → 02:00 local (+00:00 → +01:00)" in html
    assert "02:00 Europe/Lisbon: 30 fires" in html  # 02:00 WEST is 01:00 UTC that night
    assert _count(html, "dst") == 2  # its line and its label
    assert "computed from the first 34 routines in key order of the whole fleet (all of them)" in html


def test_the_next_24_h_reads_a_bounded_sample_and_says_so() -> None:
    store = MemoryStore()
    for n in range(nextday.SAMPLE + 5):
        store.put_routine(make_routine(f"r{n:05d}", scope=A, schedule=LISBON_2AM, registered_at=NOW), now=NOW)
    day = nextday.next_day(store, Access(None, False), None, NOW)
    assert day.read == nextday.SAMPLE and day.more_routines and day.fires == nextday.SAMPLE
    assert f"a sample: there are more than {nextday.SAMPLE:,}" in nextday.next_day_chart(day, "the fleet")


def _with_runs() -> MemoryStore:
    store = MemoryStore()
    store.put_routine(make_routine(HOSTILE, scope=A, next_due_at=T0), now=REGISTERED)
    for k in range(3):  # three fires: completed, failed, then one skipped (overlap) while the third runs
        at = T0 + k * HOUR
        got = store.claim_due(at, 10, fire_next_due(HOUR), TIMERS).claimed
        run = got[0]
        if k < 2:
            store.start(run.key, now=at + timedelta(seconds=1))
            result = RunResult.completed("ok", cost_micros=0) if k == 0 else RunResult.failed("provider_error")
            store.finish(run.key, result, now=at + timedelta(seconds=5), timers=TIMERS)
    return store


def test_the_routine_page_draws_one_mark_per_run_its_next_fires_and_escapes_the_id() -> None:
    store = _with_runs()
    runs = store.list_runs(A, routine_id=HOSTILE)
    with client(store, clock=lambda: T0 + 3 * HOUR) as c:
        page = c.get("/dashboard/routine", params={"scope": str(A), "id": HOSTILE}, headers=auth()).text
    assert HOSTILE not in page and "&lt;script&gt;" in page
    marks = _count(page, "run") + _count(page, "skipped")
    assert marks == len(runs) == 3 and _count(page, "run completed") == 1 and _count(page, "run failed") == 1
    assert "Runs over time: 3 runs" in page and "missed fires (never claimed)" in page
    assert _count(page, "fire") == 10 and "<title>The next 10 fires" in page  # on a time axis
    assert "took 4.0 s" in page


def test_a_paused_routine_says_what_it_will_do_and_its_pause_is_a_span() -> None:
    store = _with_runs()
    rid = HOSTILE
    with client(store, clock=lambda: T0 + 3 * HOUR) as c:
        path = "/dashboard/act/pause"
        params = {"scope": str(A), "routine": rid}
        token = csrf_of(c.get(path, params=params, headers=auth()).text)
        assert c.post(path, params=params, headers=auth(), data={"csrf": "0" * 64}).status_code == 403
        done = c.post(path, params=params, headers=auth(), data={"csrf": token, "reason": "<b>night</b>"})
        assert "pause done" in done.text
        page = c.get("/dashboard/routine", params={"scope": str(A), "id": rid}, headers=auth()).text
    assert "resumes at the next fire after resume" in page
    assert _count(page, "fire") == 0 and "<th>local</th>" not in page  # no list of fires that will not happen
    assert _count(page, "span") == 1 and "&lt;b&gt;night&lt;/b&gt;" in page and "<b>night" not in page


def test_a_disabled_a_deleted_and_a_finished_routine_say_what_they_will_do() -> None:
    store = MemoryStore()
    store.put_routine(make_routine("off", scope=A), now=REGISTERED)
    store.set_enabled(A, "off", False, now=T0, next_due_at=None, reason="<i>retired</i>")
    once = {"at": (T0 - HOUR).isoformat()}
    store.put_routine(make_routine("once", scope=A, schedule=once, next_due_at=None, last_fire=T0 - HOUR), now=T0)
    store.put_routine(make_routine("gone", scope=A), now=REGISTERED)
    store.delete_routine(A, "gone", now=T0)
    with client(store) as c:
        off = c.get("/dashboard/routine?scope=org-a/user-1&id=off", headers=auth()).text
        once_page = c.get("/dashboard/routine?scope=org-a/user-1&id=once", headers=auth()).text
    assert "disabled (&lt;i&gt;retired&lt;/i&gt;): no fire until it is enabled" in off and "<i>retired" not in off
    assert "it resumes at the next fire after enable" in off and _count(off, "fire") == 0
    assert "finished: its schedule has no fire after now" in once_page and _count(once_page, "fire") == 0
    from alma_schedule.dashboard.views_timeline import what_it_will_do

    gone = store.get_routine(A, "gone", include_deleted=True)
    assert gone is not None and (what_it_will_do(gone, T0) or "").startswith("deleted at 2026-03-01T12:00:00+00:00")
