"""The revision of speed: what the planner needs to read one run by its key.
Revision ID: 0006_speed
Revises: 0005_dashboard
"""

from __future__ import annotations

from typing import Any

from alembic import op

revision = "0006_speed"
down_revision = "0005_dashboard"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"
#: The statistics object's name (in the store's schema, beside its table).
RUN_KEY_STATISTICS = "st_runs_routine"


def _space() -> Any:
    ctx = op.get_context()
    return ctx.config.attributes.get("namespace") if ctx.config is not None else None


def _schema() -> str:
    """The store's real PostgreSQL schema (raw SQL is not translated from the placeholder)."""
    space = _space()
    return str(space.name) if space is not None else "alma"


def _postgres() -> bool:
    return bool(op.get_context().dialect.name == "postgresql")


def upgrade() -> None:
    """Each part's block below."""
    # --- the run key's statistics ---
    if _postgres():
        schema = _schema()
        op.execute(
            f'CREATE STATISTICS IF NOT EXISTS "{schema}".{RUN_KEY_STATISTICS} (dependencies)'
            f' ON org, uid, routine_id FROM "{schema}".runs'
        )
        op.execute(f'ANALYZE "{schema}".runs')
    # --- end the run key's statistics ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- the run key's statistics ---
    if _postgres():
        op.execute(f'DROP STATISTICS IF EXISTS "{_schema()}".{RUN_KEY_STATISTICS}')
    # --- end the run key's statistics ---
