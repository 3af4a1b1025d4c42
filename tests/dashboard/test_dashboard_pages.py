"""The dashboard's pages and actions through the real ASGI app over a memory store."""

from __future__ import annotations

import html
from datetime import timedelta

from dashboard_support import HOSTILE, A, OkRunner, auth, client, csrf_of, seeded_store

from alma_schedule.core import Solar, fire_id, next_fires
from alma_schedule.model import RunResult
from alma_schedule.model.time import SettableTime
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing.builders import T0, TIMERS, make_routine, run_in

ROUTINE = "/dashboard/routine?scope=org-a/user-1&id="


def with_runs() -> tuple[MemoryStore, str]:
    """The seeded store plus a run stuck in ``running`` for a day and a failed run two hours ago."""
    store = seeded_store()
    stuck = run_in(store, "running", "stuck-one", now=T0 - timedelta(days=1))
    failed = run_in(store, "running", "flaky", now=T0 - timedelta(hours=2))
    done = store.finish(failed.key, RunResult.failed("provider_error"), now=T0 - timedelta(hours=2), timers=TIMERS)
    assert done.won
    return store, stuck.run_id


def test_the_overview_shows_clock_health_and_failures_by_reason() -> None:
    store, _ = with_runs()
    with client(store) as c:
        page = c.get("/dashboard/?scope=org-a/user-1", headers=auth()).text
        assert "clock ok: last tick 2026-03-01T11:59:30Z, 30 s ago" in page
        assert "<td>provider_error</td><td><a href=" in page and ">1</a></td>" in page
    with client(store, dashboard_scopes="*", clock=lambda: T0 + timedelta(hours=1)) as fleet:
        page = fleet.get("/dashboard/", headers=auth()).text
        assert "clock stale" in page and '<td>blocked runs</td><td><a href="/dashboard/stuck">1</a>' in page
        assert '<td><a href="/dashboard/routines?state=enabled">6</a></td>' in page
        assert '<td><a href="/dashboard/routines?state=paused">0</a></td>' in page


def test_the_routines_page_lists_the_scope_with_filters_and_escapes_ids() -> None:
    store, _ = with_runs()
    with client(store) as c:
        page = c.get("/dashboard/routines?scope=org-a/user-1", headers=auth()).text
        assert HOSTILE not in page and html.escape(HOSTILE) in page  # shown as text, never as markup
        assert "every 60" in page and "cron 0 8 * * * in Europe/Lisbon" in page
        assert "2026-03-01T12:01:00Z" in page  # r1's next fire
        assert "failed (provider_error)" in page  # flaky's last outcome
        other = c.get("/dashboard/routines?scope=org-a/user-1&kind=other", headers=auth()).text
        assert "daily" in other and ">r1<" not in other
        paused = c.get("/dashboard/routines?scope=org-a/user-1&state=paused", headers=auth()).text
        assert "no routine" in paused
        every = c.get("/dashboard/routines", headers=auth()).text  # org-a/*: its scopes, no scope typed
        assert ">r1<" in every and ">daily<" in every and "secret-b" not in every and "pick a scope" not in every


def test_the_routine_page_shows_next_fires_the_blocking_run_and_the_last_runs() -> None:
    store, stuck_id = with_runs()
    with client(store) as c:
        daily = c.get(ROUTINE + "daily", headers=auth()).text
        assert "Next fires" in daily and "Europe/Lisbon" in daily
        stuck = c.get(ROUTINE + "stuck-one", headers=auth()).text
        assert "Blocking run" in stuck and stuck_id in stuck
        hostile = c.get("/dashboard/routine", params={"scope": "org-a/user-1", "id": HOSTILE}, headers=auth())
        assert hostile.status_code == 200 and HOSTILE not in hostile.text
        assert c.get(ROUTINE + "nope", headers=auth()).status_code == 404


def test_the_ledger_filters_and_pages_by_key() -> None:
    store, stuck_id = with_runs()
    with client(store) as c:
        page = c.get("/dashboard/ledger?scope=org-a/user-1", headers=auth()).text
        assert stuck_id in page and "provider_error" in page
        assert page.index("flaky") < page.index("stuck-one")  # newest first
        by_reason = c.get("/dashboard/ledger?scope=org-a/user-1&reason=provider_error", headers=auth()).text
        assert "flaky" in by_reason and stuck_id not in by_reason
        by_state = c.get("/dashboard/ledger?scope=org-a/user-1&state=running", headers=auth()).text
        assert stuck_id in by_state and "provider_error" not in by_state
        until = c.get("/dashboard/ledger?scope=org-a/user-1&until=2026-02-28T13:00:00Z", headers=auth()).text
        assert stuck_id in until and "flaky" not in until
        since = c.get("/dashboard/ledger?scope=org-a/user-1&since=2026-03-01T09:00:00Z", headers=auth()).text
        assert "flaky" in since and stuck_id not in since
        bad = c.get("/dashboard/ledger?scope=org-a/user-1&since=yesterday", headers=auth())
        assert bad.status_code == 400 and "is not an ISO-8601 instant" in bad.text
    for n in range(60):  # more than a page: the next page starts after the last row's key
        run_in(store, "running", f"p{n:02d}", now=T0 - timedelta(minutes=n + 1))
    with client(store) as c:
        first = c.get("/dashboard/ledger?scope=org-a/user-1", headers=auth()).text
        assert "p00" in first and "p49" in first and "p50" not in first and "older runs" in first
        href = html.unescape(first.split('<a href="')[-1].split('"')[0])
        second = c.get(href, headers=auth()).text
        assert "p50" in second and "p59" in second and "p49" not in second


def test_the_stuck_page_shows_what_record_would_do_and_records_through_the_engine() -> None:
    store, stuck_id = with_runs()
    with client(store) as c:
        page = c.get("/dashboard/stuck", headers=auth()).text
        assert stuck_id in page and "record moves it from running" in page
        path = f"/dashboard/act/record?scope=org-a/user-1&routine=stuck-one&run={stuck_id}"
        token = csrf_of(c.get(path, headers=auth()).text)
        refused = c.post(path, headers=auth(), data={"csrf": token, "outcome": "failed", "reason": "no-such-reason"})
        assert "refused: reason &#x27;no-such-reason&#x27; is not a known reason code" in refused.text
        done = c.post(path, headers=auth(), data={"csrf": token, "outcome": "failed", "reason": "provider_error"})
        assert "record done" in done.text
        again = c.post(path, headers=auth(), data={"csrf": token, "outcome": "failed", "reason": "provider_error"})
        assert "nothing recorded: the run is failed" in again.text
        assert stuck_id not in c.get("/dashboard/stuck", headers=auth()).text


def test_pause_resume_disable_enable_trigger_through_their_confirmations() -> None:
    store = seeded_store()
    with client(store) as c:
        base = "?scope=org-a/user-1&routine=r1"
        confirm = c.get("/dashboard/act/pause" + base, headers=auth())
        assert "confirm pause" in confirm.text and 'name="reason"' in confirm.text
        token = csrf_of(confirm.text)
        c.post("/dashboard/act/pause" + base, headers=auth(), data={"csrf": token, "reason": "maintenance"})
        routine = store.get_routine(A, "r1")
        assert routine is not None and routine.paused_reason == "maintenance"
        refused = c.post("/dashboard/act/trigger" + base, headers=auth(), data={"csrf": token})
        assert "refused:" in refused.text and "paused" in refused.text  # the engine's refusal, as the CLI's
        c.post("/dashboard/act/resume" + base, headers=auth(), data={"csrf": token})
        c.post("/dashboard/act/disable" + base, headers=auth(), data={"csrf": token})
        routine = store.get_routine(A, "r1")
        assert routine is not None and routine.paused_reason is None and not routine.enabled
        c.post("/dashboard/act/enable" + base, headers=auth(), data={"csrf": token})
        triggered = c.post("/dashboard/act/trigger" + base, headers=auth(), data={"csrf": token})
        assert "trigger done" in triggered.text
        assert any(r.run_id.startswith("manual:") for r in store.list_runs(A, routine_id="r1"))
        assert c.get("/dashboard/act/explode" + base, headers=auth()).status_code == 404


def test_real_ticks_fill_the_tick_log_the_overview_reads() -> None:
    from alma_schedule.engine import create_schedule
    from alma_schedule.settings import Settings

    store = seeded_store()
    clock = SettableTime(T0 + timedelta(minutes=5))
    engine = create_schedule(store=store, runner=OkRunner(), settings=Settings(clock=clock))
    first = engine.tick()
    clock.advance(timedelta(seconds=20))
    engine.tick()
    (minute,) = store.tick_log()
    assert minute.minute == T0 + timedelta(minutes=5) and minute.ticks == 2
    assert minute.claimed == len(first.claimed) > 0 and minute.lag_p95 is not None and minute.lag_p95 >= 0
    with client(store, clock=lambda: T0 + timedelta(minutes=6)) as c:
        page = c.get("/dashboard/", headers=auth()).text
        assert "ticks in the last hour: <b>2</b>" in page and f"fires claimed: {minute.claimed}" in page


def test_the_routine_page_shows_the_fires_its_claims_collapsed() -> None:
    """Issue 44: the fires no tick claimed (downtime), counted on the routine: 9, and 10,000+ once a
    claim reached its cap (a minutely routine down for a month)."""
    from alma_schedule.engine.decide import decide
    from alma_schedule.settings import Settings
    from alma_schedule.testing.builders import make_routine

    store = seeded_store()
    month = T0 - timedelta(days=30)
    down = {"down": T0 - timedelta(minutes=10), "month": month}
    for rid, since in down.items():
        row = make_routine(rid, scope=A, registered_at=month, last_fire=since, next_due_at=since + timedelta(minutes=1))
        store.put_routine(row, now=month)
    store.claim_due(T0, 100, lambda r: decide(r, T0, Settings()), TIMERS)
    with client(store) as c:
        page = c.get(ROUTINE + "down", headers=auth()).text
        assert "<td>missed fires (never claimed)</td><td>9</td>" in page
        page = c.get(ROUTINE + "month", headers=auth()).text
        assert "<td>missed fires (never claimed)</td><td>10,000+</td>" in page
        assert "<td>missed fires (never claimed)</td><td>0</td>" in c.get(ROUTINE + "daily", headers=auth()).text


def test_a_solar_routine_shows_its_event_and_its_next_fires_in_its_zone() -> None:
    store = seeded_store()
    sunset = {"solar": "sunset", "lat": 64.1466, "lon": -21.9426, "tz": "Atlantic/Reykjavik"}
    store.put_routine(make_routine("lights", scope=A, schedule=sunset), now=T0)
    with client(store) as c:
        listed = c.get("/dashboard/routines?scope=org-a/user-1", headers=auth()).text
        assert "sunset at lat 64.1466, lon -21.9426" in listed
        page = c.get(ROUTINE + "lights", headers=auth()).text
        fires = next_fires(Solar("sunset", 64.1466, -21.9426), T0, T0, 10)
        assert "Next fires" in page and "Atlantic/Reykjavik" in page
        assert all(fire_id(f) in page for f in fires)
