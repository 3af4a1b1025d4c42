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

# --- backfill: literals of this part (never imported from the model) ---
UTC_DATETIME = sa.DateTime(timezone=True)
ORIGINS_BEFORE = "origin IN ('schedule', 'manual')"
ORIGINS_BACKFILL = "origin IN ('schedule', 'manual', 'backfill')"
BACKFILL_PENDING = "cancelled_at IS NULL AND next_at IS NOT NULL"


def _backfill_where() -> dict[str, Any]:
    return {"postgresql_where": sa.text(BACKFILL_PENDING), "sqlite_where": sa.text(BACKFILL_PENDING)}


def _space() -> Any:
    ctx = op.get_context()
    return ctx.config.attributes.get("namespace") if ctx.config is not None else None


def _real(table: str) -> str:
    """The real name of one of our tables (``alma.runs`` / ``alma_runs``): raw SQL and SQLite's
    reflection are not translated from the placeholder schema."""
    space = _space()
    if space is not None:
        return str(space.table(table))
    return f"alma.{table}" if op.get_context().dialect.name == "postgresql" else f"alma_{table}"


def _alter_schema() -> str:
    """The schema an ALTER names: PostgreSQL's real one (Alembic's ALTER text is not translated);
    on SQLite the placeholder (the engine's statement hook prefixes it)."""
    if op.get_context().dialect.name != "postgresql":
        return SCHEMA
    space = _space()
    return str(space.name) if space is not None else "alma"


def _origin_check(sql: str) -> None:
    """Replace ``ck_runs_origin``: on PostgreSQL ``NOT VALID`` then ``VALIDATE`` (no long lock while
    old workers write); on SQLite (no ALTER of a CHECK) a batch rebuild of ``runs``."""
    name = _real("runs")
    if op.get_context().dialect.name == "postgresql":
        op.drop_constraint("ck_runs_origin", "runs", schema=_alter_schema(), type_="check")
        op.execute(f"ALTER TABLE {name} ADD CONSTRAINT ck_runs_origin CHECK ({sql}) NOT VALID")
        op.execute(f"ALTER TABLE {name} VALIDATE CONSTRAINT ck_runs_origin")
        return
    # Batch mode reflects the table, which SQLite only can under its real (prefixed) name.
    with op.batch_alter_table(name, recreate="always") as batch:
        batch.drop_constraint("ck_runs_origin", type_="check")
        batch.create_check_constraint("ck_runs_origin", sa.text(sql))
# --- end backfill ---


def upgrade() -> None:
    """Each part's block below."""
    # --- backfill: routines.pruned_through, the backfills table, origin 'backfill' ---
    column = sa.Column("pruned_through", UTC_DATETIME, nullable=True)
    op.add_column("routines", column, schema=_alter_schema())
    op.create_table(
        "backfills",
        sa.Column("org", sa.String(length=200), nullable=False),
        sa.Column("uid", sa.String(length=200), nullable=False),
        sa.Column("routine_id", sa.String(length=200), nullable=False),
        sa.Column("from_at", UTC_DATETIME, nullable=False),
        sa.Column("to_at", UTC_DATETIME, nullable=False),
        sa.Column("next_at", UTC_DATETIME, nullable=True),
        sa.Column("max_fires", sa.Integer(), nullable=False),
        sa.Column("cancelled_at", UTC_DATETIME, nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("org", "uid", "routine_id"),
        schema=SCHEMA,
    )
    # A new, empty table nothing reads yet: its index needs no CONCURRENTLY.
    op.create_index("ix_backfills_pending", "backfills", ["next_at"], schema=SCHEMA, **_backfill_where())
    _origin_check(ORIGINS_BACKFILL)
    # --- end backfill ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- backfill ---
    op.execute(f"DELETE FROM {_real('runs')} WHERE origin = 'backfill'")
    _origin_check(ORIGINS_BEFORE)
    op.drop_index("ix_backfills_pending", table_name="backfills", schema=SCHEMA)
    op.drop_table("backfills", schema=SCHEMA)
    op.execute(f"ALTER TABLE {_real('routines')} DROP COLUMN pruned_through")  # SQLite >= 3.35
    # --- end backfill ---
