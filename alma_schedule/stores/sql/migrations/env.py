"""Alembic environment of the alma-schedule store (run by :func:`alma_schedule.stores.sql.migrate_store`).

The caller hands over an open connection (``config.attributes["connection"]``) that already holds
the migration lock; this script only runs the revisions inside ONE transaction on it (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: transactional DDL), so a migration applies entirely or not at all.
"""

from __future__ import annotations

from alembic import context

from alma_schedule.stores.sql.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only migrate_store runs this environment
    raise RuntimeError("run migrations through alma_schedule.stores.sql.migrate_store(url)")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
