"""The revision of the dashboard: the tick log the overview reads.
Revision ID: 0005_dashboard
Revises: 0004_schedule_policies
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_dashboard"
down_revision = "0004_schedule_policies"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"
UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Each part's block below."""
    # --- the tick log: tick_log(minute, ticks, claimed, lag_p50, lag_p95) ---
    op.create_table(
        "tick_log",
        sa.Column("minute", UTC_DATETIME, nullable=False),
        sa.Column("ticks", sa.Integer(), nullable=False),
        sa.Column("claimed", sa.Integer(), nullable=False),
        sa.Column("lag_p50", sa.Float(), nullable=True),
        sa.Column("lag_p95", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("minute"),
        schema=SCHEMA,
        if_not_exists=True,
    )
    # --- end the tick log ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- the tick log ---
    op.drop_table("tick_log", schema=SCHEMA)
    # --- end the tick log ---
