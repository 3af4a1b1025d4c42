"""Issue 14's revision (faults and abuse): expand-only changes for a killed run's owner.

Revision ID: 0003_faults
Revises: 0002_own_namespace
Create Date: 2026-12-01

The project's rules for a revision: ONE revision per issue (later changes of issue 14 go here);
expand-only and safe while old workers run (new columns nullable or with a constant default, last
in the table; indexes CONCURRENTLY on PostgreSQL; CHECKs ``NOT VALID`` then ``VALIDATE``; no rename
or drop); state lists as literals, never imported from the model; every table and index in the
placeholder schema ``SCHEMA``. Each part of the issue adds its block, delimited by a comment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_faults"
down_revision = "0002_own_namespace"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"


def _alter_schema() -> str:
    """The schema to name in ``op.add_column`` / ``op.drop_column`` (shared by every block).

    Alembic renders ``ALTER TABLE`` with the schema name as given, outside SQLAlchemy's
    ``schema_translate_map``: on PostgreSQL give it the real schema the connection maps the
    placeholder to. SQLite's statements keep the placeholder (the engine rewrites it as sent).
    """
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return SCHEMA
    mapping = bind.get_execution_options().get("schema_translate_map") or {}
    return str(mapping.get(SCHEMA, SCHEMA))


def upgrade() -> None:
    """Each part's block below."""
    # --- blocked marker: a running run blocked at once (runs.blocked_at, runs.blocked_why) ---
    # Nullable, last in the table: an old worker neither reads nor writes them. No index: the
    # reads filter the non-terminal rows (one per routine at most), already indexed by state.
    schema = _alter_schema()
    op.add_column("runs", sa.Column("blocked_at", sa.DateTime(timezone=True), nullable=True), schema=schema)
    op.add_column("runs", sa.Column("blocked_why", sa.String(length=32), nullable=True), schema=schema)
    # --- end blocked marker ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- blocked marker ---
    schema = _alter_schema()
    op.drop_column("runs", "blocked_why", schema=schema)
    op.drop_column("runs", "blocked_at", schema=schema)
    # --- end blocked marker ---
