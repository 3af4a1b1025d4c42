"""SQL statements of the store for business calendars (system data): the row by name, all rows, the
versioned write (insert, or update under a compare-and-set on the version), the delete, and the
live routines whose schedule names a calendar (``schedule ->> 'calendar'``, both dialects)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.model.calendar import Calendar
from alma_schedule.stores.sql.queries.common import dt, lit
from alma_schedule.stores.sql.schema import calendars, routines

__all__ = [
    "calendar_row",
    "calendar_users",
    "delete_calendar",
    "insert_calendar",
    "select_calendar",
    "select_calendars",
    "update_calendar",
]


def select_calendar(name: str, *, lock: bool = False) -> Any:
    stmt = sa.select(calendars).where(calendars.c.name == name)
    return stmt.with_for_update() if lock else stmt


def select_calendars() -> Any:
    return sa.select(calendars).order_by(calendars.c.name)


def _values(calendar: Calendar, version: int, now: datetime) -> dict[str, Any]:
    return {
        "version": version,
        "spec": calendar.definition(),
        "holidays": [list(p) for p in calendar.holidays],
        "first_year": calendar.first_year,
        "last_year": calendar.last_year,
        "updated_at": dt(now),
    }


def insert_calendar(calendar: Calendar, now: datetime) -> Any:
    return sa.insert(calendars).values(name=calendar.name, **_values(calendar, 1, now))


def update_calendar(calendar: Calendar, old_version: int, now: datetime) -> Any:
    """The new definition at ``old_version + 1``, only while the stored version is ``old_version``."""
    return (
        sa.update(calendars)
        .where(calendars.c.name == calendar.name, calendars.c.version == old_version)
        .values(**_values(calendar, old_version + 1, now))
    )


def delete_calendar(name: str) -> Any:
    return sa.delete(calendars).where(calendars.c.name == name)


def calendar_users(name: str, limit: int) -> Any:
    """Keys of the live routines whose schedule names calendar ``name``, in key order."""
    named = routines.c.schedule.op("->>")(lit("calendar")) == sa.bindparam(None, name, type_=sa.Text)
    return (
        sa.select(routines.c.org, routines.c.uid, routines.c.routine_id)
        .where(routines.c.deleted_at.is_(None), named)
        .order_by(routines.c.org, routines.c.uid, routines.c.routine_id)
        .limit(limit)
    )


def calendar_row(row: Any) -> Calendar:
    return Calendar.from_parts(
        row.name, dict(row.spec), list(row.holidays), row.first_year, row.last_year, row.version, row.updated_at
    )
