"""The memory store's business calendars (:class:`~alma_schedule.stores.calendars.CalendarStore`):
a dict by name under the store's one lock; the in-use check reads the routines' schedule bodies."""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import datetime

from alma_schedule.errors import StoreConflict
from alma_schedule.model import Routine
from alma_schedule.model.calendar import Calendar
from alma_schedule.stores.calendars import calendar_name, in_use, put_calendar_args, users_args

RKey = tuple[str, str, str]


class CalendarsMixin:
    _lock: threading.RLock
    _routines: dict[RKey, Routine]
    _bodies: dict[RKey, tuple[str, str]]
    _calendars: dict[str, Calendar]

    def put_calendar(self, calendar: Calendar, *, now: datetime, expected_version: int | None = None) -> Calendar:
        calendar, now = put_calendar_args(calendar, now, expected_version)
        with self._lock:
            old = self._calendars.get(calendar.name)
            version = 0 if old is None else old.version
            if expected_version is not None and expected_version != version:
                raise StoreConflict(
                    f"calendar {calendar.name!r} is at version {version}, not the expected {expected_version}"
                )
            row = dataclasses.replace(calendar, version=version + 1, updated_at=now)
            self._calendars[calendar.name] = row
            return row

    def get_calendar(self, name: str) -> Calendar | None:
        name = calendar_name(name)
        with self._lock:
            return self._calendars.get(name)

    def list_calendars(self) -> list[Calendar]:
        with self._lock:
            return [self._calendars[k] for k in sorted(self._calendars)]

    def _users(self, name: str) -> list[RKey]:
        found = []
        for key in sorted(self._routines):
            if self._routines[key].deleted_at is not None:
                continue
            schedule = json.loads(self._bodies[key][0])
            if isinstance(schedule, dict) and schedule.get("calendar") == name:
                found.append(key)
        return found

    def calendar_users(self, name: str, limit: int = 100) -> list[tuple[str, str, str]]:
        name, limit = users_args(name, limit)
        with self._lock:
            return self._users(name)[:limit]

    def delete_calendar(self, name: str) -> bool:
        name = calendar_name(name)
        with self._lock:
            users = self._users(name)
            if users:
                raise in_use(name, users)
            return self._calendars.pop(name, None) is not None
