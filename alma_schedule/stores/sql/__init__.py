"""The SQL backend: :class:`SqlStore` (PostgreSQL and SQLite on SQLAlchemy 2 Core) and
:func:`migrate_store` (Alembic, idempotent, safe when run concurrently).

``migrate_store`` is imported on first use (PEP 562): Alembic (and Mako, which it brings) costs
about 12 MB of resident memory and 0.4 s of start-up, and a worker, a clock or a dashboard never
migrates (the store checks its revision against a constant: ``HEAD_REVISION``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alma_schedule.stores.sql.store import SqlStore

if TYPE_CHECKING:
    from alma_schedule.stores.sql.migrate import migrate_store

__all__ = ["SqlStore", "migrate_store"]


def __getattr__(name: str) -> Any:
    if name == "migrate_store":
        from alma_schedule.stores.sql.migrate import migrate_store

        return migrate_store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
