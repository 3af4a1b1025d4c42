"""The SQL backend: :class:`SqlStore` (PostgreSQL and SQLite on SQLAlchemy 2 Core) and
:func:`migrate_store` (Alembic, idempotent, safe when run concurrently).
docs/architecture.md, section "The modules, in detail" (stores/sql/__init__.py).
"""

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
