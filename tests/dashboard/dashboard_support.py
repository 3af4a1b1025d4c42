"""Shared set-up of the dashboard tests: a memory store with routines of two orgs, and the app."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from starlette.testclient import TestClient

from alma_schedule.dashboard.auth import hash_password
from alma_schedule.http import create_http_app
from alma_schedule.model import Routine, RunHandle, RunResult, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Secret, Settings
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing.builders import REGISTERED, T0, make_routine

USER, PASSWORD = "ops", "correct horse"
HOSTILE = "<script>alert(1)</script>"
A = Scope("org-a", "user-1")
B = Scope("org-b", "user-2")
#: Every dashboard page over the seeded store (org-a/user-1's r1), the pause confirmation last.
PAUSE = "/dashboard/act/pause?scope=org-a/user-1&routine=r1"
PAGES = [
    "/dashboard/",
    "/dashboard/routines?scope=org-a/user-1",
    "/dashboard/routine?scope=org-a/user-1&id=r1",
    "/dashboard/ledger?scope=org-a/user-1",
    "/dashboard/stuck",
    "/dashboard/scopes",
    "/dashboard/routines",
    "/dashboard/ledger",
    PAUSE,
]
#: The least scrypt cost the dashboard accepts (n=2**14, r=8: hash_password's default); a verified
#: header is remembered, so each app computes it once per login.
PASSWORD_HASH = hash_password(PASSWORD)


def auth(user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def seeded_store() -> MemoryStore:
    store = MemoryStore()
    store.put_routine(make_routine("r1", scope=A, next_due_at=T0 + timedelta(minutes=1)), now=REGISTERED)
    store.put_routine(make_routine(HOSTILE, scope=A), now=REGISTERED)
    daily = {"cron": "0 8 * * *", "tz": "Europe/Lisbon"}
    store.put_routine(make_routine("daily", scope=A, schedule=daily, kind="other"), now=REGISTERED)
    store.put_routine(make_routine("secret-b", scope=B), now=REGISTERED)
    store.heartbeat(T0 - timedelta(seconds=30))
    return store


def dashboard_settings(**changes: Any) -> Settings:
    values: dict[str, Any] = {
        "http_secret": Secret("tick-secret-of-the-clock"),
        "dashboard_user": USER,
        "dashboard_password_hash": Secret(PASSWORD_HASH),
        "dashboard_scopes": "org-a/*",
        "dashboard_read_only": False,
        "clock": SettableTime(T0),
    }
    values.update(changes)
    return Settings(**values)


def client(store: MemoryStore, **changes: Any) -> TestClient:
    return TestClient(create_http_app(dashboard_settings(**changes), store=store, send=lambda s, n: "t"))


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the confirmation carries a CSRF token"
    return found.group(1)


class OkRunner:
    """A runner that completes every run (the engine's real path, no provider)."""

    def validate(self, routine: Routine) -> None:
        return None

    def config_revision_inputs(self, routine: Routine) -> dict[str, Any]:
        return {}

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        return RunResult.completed("ok", cost_micros=0)


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> None:
    """Poll ``cond`` until it holds; fail naming ``what`` after ``timeout`` s (a guard, not a measure)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)
