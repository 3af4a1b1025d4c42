"""Alembic environment of the alma-schedule store (run by :func:`alma_schedule.stores.sql.migrate_store`).
docs/architecture.md, section "The modules, in detail" (stores/sql/migrations/env.py).
"""

from __future__ import annotations

from alembic import context

from alma_schedule.stores.sql.namespace import Namespace
from alma_schedule.stores.sql.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only migrate_store runs this environment
    raise RuntimeError("run migrations through alma_schedule.stores.sql.migrate_store(url)")
space = context.config.attributes.get("namespace") or Namespace.of(None, connection.dialect.name)

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    version_table=space.version_table,
    version_table_schema=space.version_table_schema,
)
with context.begin_transaction():
    context.run_migrations()
