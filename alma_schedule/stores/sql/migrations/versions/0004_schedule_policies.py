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

import sqlalchemy as sa
from alembic import op

revision = "0004_schedule_policies"
down_revision = "0003_faults"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"


def _schema() -> str:
    """The real schema on PostgreSQL (Alembic's ALTER statements bypass ``schema_translate_map``);
    on SQLite the placeholder, which the connection rewrites into the table prefix."""
    mapping = op.get_bind().get_execution_options().get("schema_translate_map") or {}
    return str(mapping.get(SCHEMA, SCHEMA))


def upgrade() -> None:
    """Each part's block below."""
    # --- window: max_runs (routines.schedule_claims) ---
    # The schedule fires claimed while the routine has max_runs; a constant default, so old
    # workers (which never name the column) keep inserting and updating routines.
    op.add_column(
        "routines",
        sa.Column("schedule_claims", sa.Integer, nullable=False, server_default=sa.text("0")),
        schema=_schema(),
    )
    # --- end window ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- window: max_runs (routines.schedule_claims) ---
    op.drop_column("routines", "schedule_claims", schema=_schema())
    # --- end window ---
