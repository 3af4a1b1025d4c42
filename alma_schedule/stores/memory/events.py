"""The audit trail of :class:`~alma_schedule.stores.memory.MemoryStore`: the append every routine
write makes under the store's lock, a routine's history, the erasure of a scope's payloads and the
retention's bounded prune.
docs/architecture.md, section "The modules, in detail" (stores/memory/events.py).
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime

from alma_schedule.model import Scope
from alma_schedule.model.events import RoutineEvent
from alma_schedule.policies.audit import Entry
from alma_schedule.stores.validation import check_limit, check_routine_key, require_utc

__all__ = ["EventsMixin"]

RKey = tuple[str, str, str]


class EventsMixin:
    _lock: threading.RLock
    _events: list[RoutineEvent]  # in append order (MemoryStore.__init__)
    _event_seq: int

    def _events_list(self) -> list[RoutineEvent]:
        return self._events

    def _append(self, key: RKey, entry: Entry | None) -> None:
        """Append ``entry`` (None: nothing recorded) under the caller's lock, in its step."""
        if entry is None:
            return
        events = self._events_list()
        self._event_seq += 1
        events.append(
            RoutineEvent(*key, self._event_seq, entry.at, entry.actor, entry.action, entry.reason, entry.diff)
        )

    def routine_events(self, scope: Scope, routine_id: str, *, limit: int = 100) -> list[RoutineEvent]:
        key = check_routine_key(scope, routine_id)
        limit = check_limit("limit", limit)
        with self._lock:
            mine = [e for e in self._events_list() if (e.org, e.uid, e.routine_id) == key]
        mine.sort(key=lambda e: (e.at, e.event_id), reverse=True)
        return mine[:limit]

    def _erase_events(self, scope: Scope) -> None:
        """Blank the payloads of the scope's events (under the caller's lock)."""
        events = self._events_list()
        for i, e in enumerate(events):
            if (e.org, e.uid) == (scope.org, scope.uid) and (e.reason is not None or e.diff is not None):
                events[i] = dataclasses.replace(e, reason=None, diff=None)

    def prune_events(self, before: datetime, limit: int) -> int:
        before = require_utc("before", before)
        limit = check_limit("limit", limit)
        with self._lock:
            events = self._events_list()
            old = sorted((e for e in events if e.at < before), key=lambda e: (e.at, e.event_id))[:limit]
            gone = {e.event_id for e in old}
            self._events = [e for e in events if e.event_id not in gone]
            return len(gone)
