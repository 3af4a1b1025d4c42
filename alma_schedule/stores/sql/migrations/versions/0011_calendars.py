"""The revision of calendars: business calendars (calendars) and the "did not run" alarm (expect).
Revision ID: 0011_calendars
Revises: 0010_history
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0011_calendars"
down_revision = "0010_history"
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


# --- did-not-run alarm: helpers ---
#: A live routine whose schedule has ``expect`` (each dialect's JSON text; schema.EXPECT_SQL repeats it).
EXPECT_SQL = {
    "postgresql": "(schedule ->> 'expect') IS NOT NULL AND deleted_at IS NULL",
    "sqlite": "json_extract(schedule, '$.expect') IS NOT NULL AND deleted_at IS NULL",
}


def _expect_index() -> None:
    """``ix_routines_expect``: ``CREATE INDEX CONCURRENTLY IF NOT EXISTS`` on PostgreSQL (outside a
    transaction: old workers keep writing; a failed build's INVALID index is dropped first), a plain
    index on SQLite inside the revision's transaction."""
    kw: dict[str, Any] = {
        "schema": SCHEMA,
        "postgresql_where": sa.text(EXPECT_SQL["postgresql"]),
        "sqlite_where": sa.text(EXPECT_SQL["sqlite"]),
    }
    columns = ["org", "uid", "routine_id"]
    if not _postgres():
        op.create_index("ix_routines_expect", "routines", columns, if_not_exists=True, **kw)
        return
    bind = op.get_bind()
    bind.commit()
    level = bind.get_isolation_level()
    bind.execution_options(isolation_level="AUTOCOMMIT")
    try:
        op.drop_index("ix_routines_expect", "routines", schema=SCHEMA, postgresql_concurrently=True, if_exists=True)
        op.create_index("ix_routines_expect", "routines", columns, postgresql_concurrently=True, if_not_exists=True, **kw)
    finally:
        bind.commit()  # ends SQLAlchemy's autobegun (autocommit) transaction so the level can change
        bind.execution_options(isolation_level=level)


# --- end did-not-run alarm: helpers ---


def upgrade() -> None:
    """Each part's block below."""
    # --- calendars ---
    # Business calendars: system data (no scope), one row per name; the tick reads the table whole.
    from sqlalchemy.dialects import postgresql

    json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "calendars",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("spec", json, nullable=False),
        sa.Column("holidays", json, nullable=False),
        sa.Column("first_year", sa.Integer(), nullable=False),
        sa.Column("last_year", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
        schema=SCHEMA,
        if_not_exists=True,
    )
    # --- end calendars ---
    # --- did-not-run alarm ---
    # One row per overdue fire an alert was sent for (a new table nothing reads yet: built in the
    # revision's transaction, no lock on an existing table), then the routines-with-expect index.
    op.create_table(
        "overdue_alerts",
        sa.Column("org", sa.String(length=200), nullable=False),
        sa.Column("uid", sa.String(length=200), nullable=False),
        sa.Column("routine_id", sa.String(length=200), nullable=False),
        sa.Column("fire_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("org", "uid", "routine_id", "fire_at"),
        schema=SCHEMA,
        if_not_exists=True,
    )
    _expect_index()
    # --- end did-not-run alarm ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- did-not-run alarm ---
    op.drop_index("ix_routines_expect", "routines", schema=SCHEMA, if_exists=True)
    op.drop_table("overdue_alerts", schema=SCHEMA)
    # --- end did-not-run alarm ---
    # --- calendars ---
    op.drop_table("calendars", schema=SCHEMA, if_exists=True)
    # --- end calendars ---
