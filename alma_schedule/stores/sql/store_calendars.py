"""Business calendars of :class:`~alma_schedule.stores.sql.SqlStore`
(:class:`~alma_schedule.stores.calendars.CalendarStore`): system data, one row per name.
docs/architecture.md, section "The modules, in detail" (stores/sql/store_calendars.py).
"""

from __future__ import annotations

from datetime import datetime

from alma_schedule.errors import StoreConflict
from alma_schedule.model.calendar import Calendar
from alma_schedule.stores.calendars import IN_USE_SHOWN, calendar_name, in_use, put_calendar_args, users_args
from alma_schedule.stores.sql.queries import calendars as q
from alma_schedule.stores.sql.store_base import SqlBase


class CalendarsMixin(SqlBase):
    def put_calendar(self, calendar: Calendar, *, now: datetime, expected_version: int | None = None) -> Calendar:
        calendar, now = put_calendar_args(calendar, now, expected_version)
        with self._tx() as conn:
            old = conn.execute(q.select_calendar(calendar.name, lock=self.dialect == "postgresql")).first()
            version = 0 if old is None else int(old.version)
            if expected_version is not None and expected_version != version:
                raise StoreConflict(
                    f"calendar {calendar.name!r} is at version {version}, not the expected {expected_version}"
                )
            if old is None:
                conn.execute(q.insert_calendar(calendar, now))
            elif conn.execute(q.update_calendar(calendar, version, now)).rowcount != 1:
                raise StoreConflict(f"calendar {calendar.name!r} changed while it was written")
            row = conn.execute(q.select_calendar(calendar.name)).one()
        return q.calendar_row(row)

    def get_calendar(self, name: str) -> Calendar | None:
        name = calendar_name(name)
        with self._tx(read=True) as conn:
            row = conn.execute(q.select_calendar(name)).first()
        return None if row is None else q.calendar_row(row)

    def list_calendars(self) -> list[Calendar]:
        with self._tx(read=True) as conn:
            rows = conn.execute(q.select_calendars()).all()
        return [q.calendar_row(r) for r in rows]

    def calendar_users(self, name: str, limit: int = 100) -> list[tuple[str, str, str]]:
        name, limit = users_args(name, limit)
        with self._tx(read=True) as conn:
            rows = conn.execute(q.calendar_users(name, limit)).all()
        return [(r.org, r.uid, r.routine_id) for r in rows]

    def delete_calendar(self, name: str) -> bool:
        name = calendar_name(name)
        with self._tx() as conn:
            if conn.execute(q.select_calendar(name, lock=self.dialect == "postgresql")).first() is None:
                return False
            users = conn.execute(q.calendar_users(name, IN_USE_SHOWN + 1)).all()
            if users:
                raise in_use(name, [(r.org, r.uid, r.routine_id) for r in users])
            conn.execute(q.delete_calendar(name))
        return True
