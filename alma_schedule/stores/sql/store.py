"""``SqlStore``: the :class:`~alma_schedule.stores.base.Store` protocol on SQLAlchemy 2 Core, for
SQLite and PostgreSQL, one part per concept. The database must be migrated (:func:`migrate_store`);
call :meth:`dispose` in a child after ``fork``.
docs/architecture.md, section "The modules, in detail" (stores/sql/store.py).
"""

from __future__ import annotations

from alma_schedule.stores.base import RenamedMethods
from alma_schedule.stores.sql.store_backfills import BackfillsMixin
from alma_schedule.stores.sql.store_calendars import CalendarsMixin
from alma_schedule.stores.sql.store_events import EventsMixin
from alma_schedule.stores.sql.store_fleet import FleetMixin
from alma_schedule.stores.sql.store_inserts import ManualMixin
from alma_schedule.stores.sql.store_overdue import OverdueMixin
from alma_schedule.stores.sql.store_routines import RoutinesMixin
from alma_schedule.stores.sql.store_runs import RunsMixin
from alma_schedule.stores.sql.store_sweeps import SweepsMixin
from alma_schedule.stores.sql.store_system import SystemMixin
from alma_schedule.stores.sql.store_tick import TickMixin
from alma_schedule.stores.sql.store_ticklog import TickLogMixin

__all__ = ["SqlStore"]


class SqlStore(
    RoutinesMixin,
    BackfillsMixin,
    TickMixin,
    ManualMixin,
    SweepsMixin,
    RunsMixin,
    SystemMixin,
    TickLogMixin,
    EventsMixin,
    CalendarsMixin,
    OverdueMixin,
    FleetMixin,
    RenamedMethods,
):
    """The SQL backend of :class:`~alma_schedule.stores.base.Store` (see the module docstring)."""
