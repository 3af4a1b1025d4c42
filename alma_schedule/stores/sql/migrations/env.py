"""Alembic environment of the alma-schedule store (run by :func:`alma_schedule.stores.sql.migrate_store`).

The caller hands over an open connection (``config.attributes["connection"]``) that already holds
the migration lock; this script only runs the revisions inside ONE transaction on it (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: transactional DDL), so a migration applies entirely or not at all.

How the namespace reaches the scripts: they declare every table in the placeholder schema
(``alma_schedule_schema``, a literal in each script), and the connection comes from
:func:`~alma_schedule.stores.sql.engine.make_engine`, which translates it (PostgreSQL:
``schema_translate_map`` in the connection's execution options; SQLite: the table prefix). Our own
version table is named here (``config.attributes["namespace"]``): ``<schema>.schedule_version``,
or ``<prefix>_schedule_version`` on SQLite; a fleet's ``alembic_version`` is never read.
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
