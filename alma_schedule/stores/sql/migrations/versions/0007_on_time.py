"""The revision of on-time fires: the fires claims collapsed, counted on their routine.
Revision ID: 0007_on_time
Revises: 0006_speed
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007_on_time"
down_revision = "0006_speed"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"


def _postgres() -> bool:
    return bool(op.get_context().dialect.name == "postgresql")


def _alter_schema() -> str:
    """The schema an ALTER names: PostgreSQL's real one (Alembic's ALTER text is not translated from
    the placeholder); on SQLite the placeholder (the engine's statement hook prefixes it)."""
    if not _postgres():
        return SCHEMA
    ctx = op.get_context()
    space = ctx.config.attributes.get("namespace") if ctx.config is not None else None
    return str(space.name) if space is not None else "alma"


def _add_column(table: str, column: sa.Column[Any]) -> None:
    """A new column, last in the table (``IF NOT EXISTS`` on PostgreSQL: a failed run is re-run)."""
    op.add_column(table, column, schema=_alter_schema(), if_not_exists=True if _postgres() else None)


def _drop_column(table: str, column: str) -> None:
    """Drop a column this revision added (SQLite >= 3.35 drops it in place)."""
    op.drop_column(table, column, schema=_alter_schema())


def upgrade() -> None:
    """Each part's block below."""
    # --- every collapsed fire is counted: routines.fires_missed, routines.fires_missed_capped ---
    # The fires a claim collapsed (no run row), added by the statement that advances the cursor; and
    # whether one claim's count reached the cap (10,000: the count is then a lower bound).
    _add_column("routines", sa.Column("fires_missed", sa.BigInteger(), nullable=False, server_default=sa.text("0")))
    _add_column("routines", sa.Column("fires_missed_capped", sa.Boolean(), nullable=False, server_default=sa.false()))
    # --- end every collapsed fire is counted ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- every collapsed fire is counted ---
    _drop_column("routines", "fires_missed_capped")
    _drop_column("routines", "fires_missed")
    # --- end every collapsed fire is counted ---
