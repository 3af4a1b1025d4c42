"""``SqlStore``: the :class:`~alma_schedule.stores.base.Store` protocol on SQLAlchemy 2 Core, for
PostgreSQL (``postgresql+psycopg://``) and SQLite (``sqlite:///path``).

The parts live in one mixin per concept: routines (:mod:`.store_routines`), the tick's claims
(:mod:`.store_tick`) and sweeps (:mod:`.store_sweeps`), backfills and the system-wide listing
(:mod:`.store_backfills`), run transitions and money (:mod:`.store_runs`), system reads and maintenance
(:mod:`.store_system`); transactions, the engine and the error boundary in :mod:`.store_base`. All SQL
is in :mod:`.queries`; the schema in :mod:`.schema`; migrations via :func:`migrate_store`.

Open it with ``SqlStore(url)``, or ``SqlStore(url, schema="fleet2")`` for a namespace other than
``alma`` (:mod:`.namespace`: a PostgreSQL schema, an SQLite table prefix). The database must be
migrated (otherwise every call raises :class:`~alma_schedule.errors.SchemaMismatch`). A PostgreSQL
store keeps a small pool per process (``pool_size=2, max_overflow=2`` by default); call
:meth:`dispose` in a child after ``fork``.
"""

from __future__ import annotations

from alma_schedule.stores.base import RenamedMethods
from alma_schedule.stores.sql.store_backfills import BackfillsMixin
from alma_schedule.stores.sql.store_routines import RoutinesMixin
from alma_schedule.stores.sql.store_runs import RunsMixin
from alma_schedule.stores.sql.store_sweeps import SweepsMixin
from alma_schedule.stores.sql.store_system import SystemMixin
from alma_schedule.stores.sql.store_tick import TickMixin
from alma_schedule.stores.sql.store_ticklog import TickLogMixin

__all__ = ["SqlStore"]


class SqlStore(
    RoutinesMixin, BackfillsMixin, TickMixin, SweepsMixin, RunsMixin, SystemMixin, TickLogMixin, RenamedMethods
):
    """The SQL backend of :class:`~alma_schedule.stores.base.Store` (see the module docstring)."""
