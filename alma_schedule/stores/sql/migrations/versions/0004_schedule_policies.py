"""Issue 15's revision (schedule policies): buffered fires, limits, jitter, backfills, the wake-up hint.

Revision ID: 0004_schedule_policies
Revises: 0003_faults
Create Date: 2026-12-01

The project's rules for a revision: ONE revision per issue (later changes of issue 15 go here);
expand-only and safe while old workers run (new columns nullable or with a constant default, last
in the table; indexes CONCURRENTLY on PostgreSQL; CHECKs ``NOT VALID`` then ``VALIDATE``; no rename
or drop); state lists as literals, never imported from the model; every table and index in the
placeholder schema ``SCHEMA``. Each part of the issue adds its block, delimited by a comment.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004_schedule_policies"
down_revision = "0003_faults"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"
UTC_DATETIME = sa.DateTime(timezone=True)


def _postgres() -> bool:
    return bool(op.get_context().dialect.name == "postgresql")


def _add_column(table: str, column: sa.Column[Any]) -> None:
    """A new column, last in the table (nullable or with a constant default: no rewrite, no long
    lock). ``IF NOT EXISTS`` on PostgreSQL, where a concurrent index below commits mid-revision and a
    failed run is re-run; on SQLite the whole revision is one transaction."""
    op.add_column(table, column, schema=SCHEMA, if_not_exists=True if _postgres() else None)


def _index_concurrently(name: str, table: str, columns: list[str], where: str | None = None) -> None:
    """``CREATE INDEX CONCURRENTLY IF NOT EXISTS`` on PostgreSQL: outside a transaction, so old
    workers keep writing (the migration's session-level lock is still held); the revision's earlier
    changes are committed first (which is why every step of it is idempotent). A plain index on
    SQLite, the embedded store, inside the revision's transaction."""
    kw: dict[str, Any] = {"schema": SCHEMA}
    if where is not None:
        kw["postgresql_where"] = sa.text(where)
        kw["sqlite_where"] = sa.text(where)
    if not _postgres():
        op.create_index(name, table, columns, **kw)
        return
    bind = op.get_bind()
    bind.commit()
    level = bind.get_isolation_level()
    bind.execution_options(isolation_level="AUTOCOMMIT")
    try:
        op.create_index(name, table, columns, postgresql_concurrently=True, if_not_exists=True, **kw)
    finally:
        bind.commit()  # ends SQLAlchemy's autobegun (autocommit) transaction so the level can change
        bind.execution_options(isolation_level=level)


def _drop_index(name: str, table: str) -> None:
    op.drop_index(name, table, schema=SCHEMA, if_exists=True if _postgres() else None)


def _drop_column(table: str, column: str) -> None:
    with op.batch_alter_table(table, schema=SCHEMA) as batch:
        batch.drop_column(column)


def upgrade() -> None:
    """Each part's block below."""
    # --- wake-up hint and erroring routines: heartbeat.next_wake_at, ix_routines_erroring ---
    _add_column("heartbeat", sa.Column("next_wake_at", UTC_DATETIME, nullable=True))
    _index_concurrently(
        "ix_routines_erroring", "routines", ["defer_until", "org", "uid", "routine_id"], "last_error IS NOT NULL"
    )
    # --- end wake-up hint and erroring routines ---
    # --- jitter: runs.due_at (fire_at + the fire's jitter; NULL on rows written before it) ---
    _add_column("runs", sa.Column("due_at", UTC_DATETIME, nullable=True))
    # --- end jitter ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- jitter ---
    _drop_column("runs", "due_at")
    # --- end jitter ---
    # --- wake-up hint and erroring routines ---
    _drop_index("ix_routines_erroring", "routines")
    _drop_column("heartbeat", "next_wake_at")
    # --- end wake-up hint and erroring routines ---
