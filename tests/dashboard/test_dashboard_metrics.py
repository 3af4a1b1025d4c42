"""serve-http's GET /metrics after real ticks: the gauges match the store; its access."""

from __future__ import annotations

from datetime import timedelta

from dashboard_support import OkRunner, auth, client, seeded_store
from prometheus_client.parser import text_string_to_metric_families

from alma_schedule.dashboard.metrics import CACHE_SECONDS, StoreGauges
from alma_schedule.engine import create_schedule
from alma_schedule.model import Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Secret, Settings
from alma_schedule.testing.builders import T0, run_in


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_gauges_after_real_ticks_match_the_store() -> None:
    store = seeded_store()
    run_in(store, "running", "stuck-one", now=T0 - timedelta(days=1))
    clock = SettableTime(T0 + timedelta(minutes=5))
    engine = create_schedule(store=store, runner=OkRunner(), settings=Settings(clock=clock))
    for _ in range(3):
        engine.tick()
        clock.advance(timedelta(minutes=1))
    engine.pause(Scope("org-a", "user-1"), "daily", "maintenance")
    with client(store, clock=clock, dashboard_scopes="*") as c:
        got = c.get("/metrics", headers=auth())
        assert got.status_code == 200 and got.headers["content-type"].startswith("text/plain")
        samples = _samples(got.text)
    last, wake = store.last_tick(), store.next_wake_at()
    assert last is not None and wake is not None
    assert samples[("alma_last_tick_timestamp_seconds", ())] == last.timestamp()
    assert samples[("alma_next_wake_timestamp_seconds", ())] == wake.timestamp()
    assert samples[("alma_runs_blocked", ())] == len(store.blocked(clock(), Settings().run_time_limit)) == 1
    assert samples[("alma_routines", (("state", "paused"),))] == 1
    assert samples[("alma_routines", (("state", "enabled"),))] == 4  # r1, the hostile id, secret-b, stuck-one
    assert samples[("alma_routines", (("state", "disabled"),))] == 0
    assert samples[("alma_routines", (("state", "erroring"),))] == store.erroring().count
    assert samples[("alma_run_queue_depth", ())] == 0  # the in-process dispatcher's queue


def test_metrics_open_with_the_dashboard_credentials_or_the_metrics_token_only() -> None:
    store = seeded_store()
    with client(store, metrics_token=Secret("scrape-me")) as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/metrics", headers={"X-Alma-Secret": "tick-secret-of-the-clock"}).status_code == 401
        assert c.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).status_code == 200
        assert c.get("/metrics", headers=auth()).status_code == 200
    with client(store, dashboard_scopes=None, metrics_token=Secret("scrape-me")) as token_only:
        assert token_only.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).status_code == 200
        assert token_only.get("/dashboard/", headers=auth()).status_code == 404
    with client(store, dashboard_scopes=None) as neither:
        assert neither.get("/metrics").status_code == 404


def test_the_gauges_are_read_at_most_once_per_cache_period() -> None:
    store = seeded_store()
    ticks = {"t": 100.0}
    gauges = StoreGauges(Settings(clock=lambda: T0), lambda: store, lambda: 0, monotonic=lambda: ticks["t"])
    first = gauges.values()["last_tick"]
    store.heartbeat(T0 + timedelta(minutes=1))
    ticks["t"] += CACHE_SECONDS - 1
    assert gauges.values()["last_tick"] == first  # cached
    ticks["t"] += 1
    assert gauges.values()["last_tick"] == (T0 + timedelta(minutes=1)).timestamp()
