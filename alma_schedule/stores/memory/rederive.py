"""The memory store's re-derivations of ``next_due_at``: ``reindex`` (every routine, page by page)
and ``reconcile_zone_data`` (one page of the zone data walk per call), as ``Store`` states them."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from datetime import datetime

from alma_schedule.model import Routine, ZoneReconciliation
from alma_schedule.stores.arguments import reindex_args
from alma_schedule.stores.validation import check_utc

RKey = tuple[str, str, str]
Derive = Callable[[Routine], datetime | None]


class RederiveMixin:
    _lock: threading.RLock
    _routines: dict[RKey, Routine]
    _zone_data: str | None
    _zone_cursor: RKey | None

    def _out(self, key: RKey) -> Routine:  # provided by MemoryStore
        raise NotImplementedError

    def _write(self, row: Routine) -> None:  # provided by MemoryStore
        raise NotImplementedError

    def _page(self, after: RKey | None, size: int) -> list[RKey]:
        return sorted(k for k in self._routines if after is None or k > after)[:size]

    def _rederive(self, keys: list[RKey], derive: Derive, version: str | None) -> int:
        changed = 0
        updates: list[Routine] = []
        for k in keys:
            row = self._routines[k]
            if row.inactive_reason is not None:
                continue
            due = check_utc("derived next_due_at", derive(self._out(k)), optional=True)
            if due != row.next_due_at:
                changed += 1
            updates.append(dataclasses.replace(row, next_due_at=due, tzdata_version=version or row.tzdata_version))
        for row in updates:
            self._write(row)
        return changed

    def reindex(self, derive: Derive, *, tzdata_version: str | None = None, batch: int = 1000) -> int:
        size = reindex_args(derive, tzdata_version, batch)
        changed = 0
        after: RKey | None = None
        while True:
            with self._lock:
                keys = self._page(after, size)
                changed += self._rederive(keys, derive, tzdata_version)
            if len(keys) < size:
                return changed
            after = keys[-1]

    def reconcile_zone_data(self, derive: Derive, zone_data: str, *, limit: int = 1000) -> ZoneReconciliation:
        size = reindex_args(derive, zone_data, limit)
        with self._lock:
            previous = self._zone_data
            if previous == zone_data:
                return ZoneReconciliation(zone_data, previous)
            keys = self._page(self._zone_cursor, size)
            changed = self._rederive(keys, derive, zone_data)
            done = len(keys) < size
            self._zone_cursor = None if done else keys[-1]
            if done:
                self._zone_data = zone_data
            return ZoneReconciliation(zone_data, previous, changed, done)
