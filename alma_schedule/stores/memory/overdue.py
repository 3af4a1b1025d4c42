"""The "did not run" alarm of the in-memory store (:class:`~alma_schedule.stores.overdue.OverdueStore`):
the same inputs as the SQL read, the same policy, the alert rows in a dict.

docs/architecture.md, section "The modules, in detail" (stores/memory/overdue.py).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from alma_schedule.model import Routine, RunRecord
from alma_schedule.model.overdue import AlertState, FireKey, OverdueFire
from alma_schedule.policies.overdue import RECENT_RUNS, expect_of, overdue_fire
from alma_schedule.stores.overdue import fire_key_args, fires_args, overdue_args
from alma_schedule.stores.validation import require_utc

RKey = tuple[str, str, str]


class OverdueMixin:
    _lock: threading.RLock
    _routines: dict[RKey, Routine]
    _runs: dict[RKey, dict[str, RunRecord]]

    if TYPE_CHECKING:

        def _out(self, key: RKey) -> Routine: ...  # the store's own (schedule and definition attached)

    @property
    def _alerts(self) -> dict[FireKey, AlertState]:
        found: Any = self.__dict__.get("_alert_rows")
        if found is None:
            found = self.__dict__.setdefault("_alert_rows", {})
        return found  # type: ignore[no-any-return]

    def overdue(self, now: datetime, limit: int = 100) -> list[OverdueFire]:
        now, limit = overdue_args(now, limit)
        out: list[OverdueFire] = []
        with self._lock:
            for rk in sorted(self._routines):
                if len(out) >= limit:
                    break
                if self._routines[rk].deleted_at is not None:
                    continue
                routine = self._out(rk)
                if expect_of(routine) is None:
                    continue
                runs = sorted(self._runs.get(rk, {}).values(), key=lambda r: (r.fire_at, r.run_id), reverse=True)
                fire = overdue_fire(routine, runs[:RECENT_RUNS], now)
                if fire is not None:
                    row = self._alerts.get(fire.fire_key)
                    out.append(fire if row is None else dataclasses.replace(fire, delivered_at=row.delivered_at))
        return out

    def take_alerts(self, fires: Sequence[OverdueFire], *, now: datetime, lease_until: datetime) -> list[OverdueFire]:
        now, lease_until = require_utc("now", now), require_utc("lease_until", lease_until)
        checked = fires_args(fires)
        taken: list[OverdueFire] = []
        with self._lock:
            for fire, key in checked:
                row = self._alerts.get(key)
                if row is None:
                    self._alerts[key] = AlertState(*key, attempts=1, next_attempt_at=lease_until)
                elif row.delivered_at is None and row.next_attempt_at <= now:
                    self._alerts[key] = dataclasses.replace(row, attempts=row.attempts + 1, next_attempt_at=lease_until)
                else:
                    continue
                taken.append(fire)
        return taken

    def alert_state(self, key: FireKey) -> AlertState | None:
        key = fire_key_args(key)
        with self._lock:
            return self._alerts.get(key)

    def alert_retry(self, key: FireKey, *, lease_until: datetime) -> bool:
        key, lease_until = fire_key_args(key), require_utc("lease_until", lease_until)
        with self._lock:
            row = self._alerts.get(key)
            if row is None or row.delivered_at is not None:
                return False
            self._alerts[key] = dataclasses.replace(row, attempts=row.attempts + 1, next_attempt_at=lease_until)
            return True

    def alert_delivered(self, key: FireKey, *, now: datetime) -> bool:
        key, now = fire_key_args(key), require_utc("now", now)
        with self._lock:
            row = self._alerts.get(key)
            if row is None or row.delivered_at is not None:
                return False
            self._alerts[key] = dataclasses.replace(row, delivered_at=now)
            return True
