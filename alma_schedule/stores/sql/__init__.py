"""The SQL backend: :class:`SqlStore` (PostgreSQL and SQLite on SQLAlchemy 2 Core) and
:func:`migrate_store` (Alembic, idempotent, safe when run concurrently)."""

from __future__ import annotations

from alma_schedule.stores.sql.migrate import migrate_store
from alma_schedule.stores.sql.store import SqlStore

__all__ = ["SqlStore", "migrate_store"]
