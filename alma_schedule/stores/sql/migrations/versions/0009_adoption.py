"""The revision of adoption: provenance of routines and the reason of a disable.
Revision ID: 0009_adoption
Revises: 0008_hardening
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0009_adoption"
down_revision = "0008_hardening"
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
    # --- provenance and the beat sync: routines.source, source_entry, disabled_reason ---
    # Who created the routine (api, cli, dashboard, beat-sync:<app>, import-beat:<app>, ...), the
    # entry it came from, and why a disabled routine is disabled (the sync's "removed from
    # beat_schedule"). Rows from before stay NULL: unrecorded.
    for name in ("source", "source_entry", "disabled_reason"):
        _add_column("routines", sa.Column(name, sa.Text(), nullable=True))
    # --- end provenance and the beat sync ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- provenance and the beat sync ---
    for name in ("disabled_reason", "source_entry", "source"):
        _drop_column("routines", name)
    # --- end provenance and the beat sync ---
