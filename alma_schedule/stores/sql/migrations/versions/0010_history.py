"""The revision of history: the audit trail of routines (routine_events), fixed-delay routines and the
retention of run history.
Revision ID: 0010_history
Revises: 0009_adoption
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010_history"
down_revision = "0009_adoption"
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


# --- audit trail: routine_events ---
#: The history read (a routine's events in order) and the retention's prune (oldest first).
EVENT_INDEXES = {
    "ix_routine_events_routine": ["org", "uid", "routine_id", "at", "event_id"],
    "ix_routine_events_at": ["at", "event_id"],
}


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


# --- end audit trail ---


def upgrade() -> None:
    """Each part's block below."""
    # --- fixed delay ---
    # nothing to create: a fixed-delay routine ({"after": ...}) keeps its one pending fire in
    # routines.next_due_at, which the end of its run writes (policies/fixed_delay.py)
    # --- end fixed delay ---
    # --- audit trail: routine_events ---
    # Who changed a routine, when, how, and what it was before and after (policies.audit); append-only.
    # A new table and its indexes, built inside the revision's transaction: nothing else reads or
    # writes the table yet, so no lock is held on any existing table (concurrent-safe).
    op.create_table(
        "routine_events",
        sa.Column("event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("org", sa.String(length=200), nullable=False),
        sa.Column("uid", sa.String(length=200), nullable=False),
        sa.Column("routine_id", sa.String(length=200), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.Text(), nullable=True),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("diff", _json(), nullable=True),
        sa.PrimaryKeyConstraint("event_id"),
        schema=SCHEMA,
        if_not_exists=True,
    )
    for name, columns in EVENT_INDEXES.items():
        op.create_index(name, "routine_events", columns, schema=SCHEMA, if_not_exists=True)
    # --- end audit trail ---
    # --- run retention ---
    # nothing to create: Store.prune_runs reads the oldest terminal runs through ix_runs_finished
    # (finished_at, partial WHERE finished_at IS NOT NULL; revision 0001), which "finished_at < before"
    # implies (tests/stores/test_sql_retention_plan.py EXPLAINs it)
    # --- end run retention ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- run retention ---
    # --- end run retention ---
    # --- audit trail: routine_events ---
    op.drop_table("routine_events", schema=SCHEMA)
    # --- end audit trail ---
    # --- fixed delay ---
    # --- end fixed delay ---
