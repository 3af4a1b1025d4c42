"""``serve-http``'s ``GET /metrics``: gauges read from the store, in the Prometheus text format.

docs/architecture.md, section "The modules, in detail" (dashboard/metrics.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from alma_schedule.dashboard.html import CAP
from alma_schedule.errors import AlmaScheduleError, StoreError

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from alma_schedule.dashboard.login import Login
    from alma_schedule.settings import Settings
    from alma_schedule.stores.base import Store

__all__ = ["CACHE_SECONDS", "StoreGauges", "bearer_ok"]

CACHE_SECONDS = 15.0


def bearer_ok(settings: Settings, header: str | None) -> bool:
    """``Authorization: Bearer <metrics_token>``, compared in constant time."""
    token = settings.metrics_token
    if token is None or not token or not header:
        return False
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and token.matches(value.strip())


class StoreGauges:
    """A prometheus_client collector over the store, its values cached for ``CACHE_SECONDS``;
    ``fleet`` False: the clock's gauges only (a scoped dashboard user)."""

    def __init__(
        self,
        settings: Settings,
        get_store: Callable[[], Store],
        queue_depth: Callable[[], int | None],
        *,
        monotonic: Callable[[], float] = time.monotonic,
        fleet: bool = True,
    ) -> None:
        self.fleet = fleet
        self._settings = settings
        self._get_store = get_store
        self._queue_depth = queue_depth
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._cached: tuple[float, dict[str, Any]] | None = None

    def values(self) -> dict[str, Any]:
        """The gauges' values (read again once the cache is ``CACHE_SECONDS`` old)."""
        with self._lock:
            now = self._monotonic()
            if self._cached is None or now - self._cached[0] >= CACHE_SECONDS:
                self._cached = (now, self._read())
            return self._cached[1]

    def _read(self) -> dict[str, Any]:
        store, s = self._get_store(), self._settings
        at = s.now()
        last, wake = store.last_tick(), store.next_wake_at()
        clock = {
            "last_tick": None if last is None else last.timestamp(),
            "next_wake": None if wake is None else wake.timestamp(),
        }
        if not self.fleet:
            return clock
        counts = store.count_routines(CAP)
        try:
            depth = self._queue_depth()
        except AlmaScheduleError:
            depth = None
        return {
            **clock,
            "blocked": len(store.blocked(at, s.run_time_limit, CAP + 1)),
            "overdue": len(store.overdue(at, CAP + 1)),
            "routines": {**counts, "erroring": store.erroring(limit=1).count},
            "queue_depth": depth,
        }

    def describe(self) -> list[Metric]:
        return []  # values are read at scrape time only

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        v = self.values()
        if v["last_tick"] is not None:
            yield GaugeMetricFamily(
                "alma_last_tick_timestamp_seconds", "The heartbeat: when the last tick ran.", value=v["last_tick"]
            )
        if v["next_wake"] is not None:
            yield GaugeMetricFamily(
                "alma_next_wake_timestamp_seconds", "The wake-up hint the last tick stored.", value=v["next_wake"]
            )
        if not self.fleet:
            return
        yield GaugeMetricFamily("alma_runs_blocked", f"Blocked runs (capped at {CAP + 1}).", value=v["blocked"])
        yield GaugeMetricFamily(
            "alma_routines_overdue", f"Routines with an overdue fire: expect (capped at {CAP + 1}).", value=v["overdue"]
        )
        routines = GaugeMetricFamily("alma_routines", f"Routines by state (capped at {CAP + 1}).", labels=["state"])
        for state, n in sorted(v["routines"].items()):
            routines.add_metric([state], n)
        yield routines
        if v["queue_depth"] is not None:
            yield GaugeMetricFamily(
                "alma_run_queue_depth", "Messages waiting in the run queue.", value=v["queue_depth"]
            )


def metrics_text(registry: Any) -> tuple[bytes, str]:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(registry), CONTENT_TYPE_LATEST


def metrics_route(settings: Settings, get_store: Callable[[], Store], login: Login) -> Any:
    """``GET /metrics`` (401 without the dashboard's credentials or the bearer token, 429 for a
    client the throttle refuses, 503 when the store cannot answer)."""
    from prometheus_client import CollectorRegistry
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from alma_schedule.dashboard.actions import make_schedule
    from alma_schedule.dashboard.auth import Access
    from alma_schedule.dashboard.guard import store_down

    box: dict[str, Any] = {}
    fleet_user = settings.dashboard_scopes is not None and Access.from_settings(settings).fleet

    def queue_depth() -> int | None:
        if "engine" not in box:
            box["engine"] = make_schedule(settings, get_store())
        depth: int | None = box["engine"].dispatcher.run_queue_depth()
        return depth

    everything = CollectorRegistry(auto_describe=False)
    everything.register(StoreGauges(settings, get_store, queue_depth))
    clock_only = CollectorRegistry(auto_describe=False)
    clock_only.register(StoreGauges(settings, get_store, queue_depth, fleet=False))

    async def metrics(request: Request) -> Response:
        verdict = await login.check(request, lambda header: bearer_ok(settings, header))
        if not verdict.ok:
            return login.refusal(verdict)
        registry = everything if verdict.bearer or fleet_user else clock_only
        try:
            body, content_type = await run_in_threadpool(metrics_text, registry)
        except StoreError as exc:
            return store_down(request, exc)
        return Response(body, media_type=content_type)

    return Route("/metrics", metrics, methods=["GET"])
