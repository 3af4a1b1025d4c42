"""The calendars half of the storage protocol (:class:`CalendarStore`, part of
:class:`~alma_schedule.stores.base.Store`): business calendars are SYSTEM data (no scope: an
operator names them once, routines of every scope refer to them by name), and their arguments'
checks, shared by every backend.
docs/architecture.md, section "The modules, in detail" (stores/calendars.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from alma_schedule.core.types import check_calendar_name
from alma_schedule.errors import CalendarInUse, InvalidInput, InvalidSchedule
from alma_schedule.model.calendar import Calendar
from alma_schedule.stores.validation import check_limit, require_utc

__all__ = ["IN_USE_SHOWN", "CalendarStore", "calendar_name", "in_use", "put_calendar_args"]

#: How many routines a refused delete names.
IN_USE_SHOWN = 10


class CalendarStore(Protocol):
    def put_calendar(self, calendar: Calendar, *, now: datetime, expected_version: int | None = None) -> Calendar:
        """System, ONE transaction: store ``calendar`` under its name, inserted at version 1 or
        replacing the stored one at its version + 1 (``calendar.version`` is ignored), ``updated_at``
        ``now``. ``expected_version`` is a compare-and-set on the stored version (0: none stored);
        a mismatch raises :class:`StoreConflict`, writing nothing. Returns the stored calendar."""
        ...

    def get_calendar(self, name: str) -> Calendar | None:
        """System, read-only: the calendar ``name``, or None."""
        ...

    def list_calendars(self) -> list[Calendar]:
        """System, read-only, ONE query: every calendar, in name order (a small table: the tick
        reads it whole, once per tick that has routines due)."""
        ...

    def calendar_users(self, name: str, limit: int = 100) -> list[tuple[str, str, str]]:
        """System, read-only, ONE query: the keys of the live (not deleted) routines whose schedule
        names calendar ``name``, in key order, at most ``limit``."""
        ...

    def delete_calendar(self, name: str) -> bool:
        """System, ONE transaction: delete calendar ``name`` (False when there is none). While a
        live routine's schedule names it: :class:`CalendarInUse` naming the first
        :data:`IN_USE_SHOWN` routines, nothing deleted (the check and the delete are one step)."""
        ...


def calendar_name(name: object) -> str:
    """A calendar name argument; :class:`InvalidInput` naming ``name`` otherwise."""
    try:
        return check_calendar_name(name)
    except InvalidSchedule as exc:
        raise InvalidInput(str(exc)) from None


def put_calendar_args(calendar: object, now: object, expected_version: object) -> tuple[Calendar, datetime]:
    if not isinstance(calendar, Calendar):
        raise InvalidInput(f"'calendar' must be a Calendar, got {type(calendar).__name__}")
    if expected_version is not None and (
        isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 0
    ):
        raise InvalidInput(f"'expected_version' must be a whole number >= 0, got {expected_version!r}")
    return calendar, require_utc("now", now)


def users_args(name: object, limit: object) -> tuple[str, int]:
    return calendar_name(name), check_limit("limit", limit)


def in_use(name: str, keys: list[tuple[str, str, str]]) -> CalendarInUse:
    """The refusal of deleting ``name`` while the routines ``keys`` name it."""
    shown = tuple("/".join(k) for k in keys[:IN_USE_SHOWN])
    more = "" if len(keys) <= IN_USE_SHOWN else f" and {len(keys) - IN_USE_SHOWN} more"
    return CalendarInUse(
        f"'name': calendar {name!r} is in use by {', '.join(shown)}{more}; change their schedules first",
        routines=shown,
    )
