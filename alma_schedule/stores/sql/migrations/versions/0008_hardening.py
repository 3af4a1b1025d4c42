"""The revision of hardening: ``max_runs`` counts starts.
Revision ID: 0008_hardening
Revises: 0007_on_time
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0008_hardening"
down_revision = "0007_on_time"
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


# --- max_runs counts starts: routines.schedule_starts (item 13) ---


def _seed_starts() -> None:
    """``schedule_starts`` from ``schedule_claims``, so every routine keeps its meaning: a routine
    finished before the upgrade (its claims at its ``max_runs``, none pending) stays finished. A
    schedule fire still ``claimed`` was counted by its claim and counts again when it starts, so it
    is left out of the seed (never below 0): a one-off claimed just before the upgrade still runs,
    once. Tables (not table clauses), so the schema map applies; literals of this revision."""
    meta = sa.MetaData()
    key = [sa.Column(name, sa.String(200)) for name in ("org", "uid", "routine_id")]
    routines = sa.Table(
        "routines",
        meta,
        *key,
        sa.Column("schedule_claims", sa.Integer),
        sa.Column("schedule_starts", sa.BigInteger),
        schema=SCHEMA,
    )
    runs = sa.Table(
        "runs",
        meta,
        *(sa.Column(c.name, c.type) for c in key),
        sa.Column("state", sa.String(16)),
        sa.Column("origin", sa.String(16)),
        schema=SCHEMA,
    )
    pending = (
        sa.select(sa.func.count())
        .where(
            runs.c.org == routines.c.org,
            runs.c.uid == routines.c.uid,
            runs.c.routine_id == routines.c.routine_id,
            runs.c.state == sa.literal_column("'claimed'"),
            runs.c.origin == sa.literal_column("'schedule'"),
        )
        .scalar_subquery()
    )
    seed = routines.c.schedule_claims - pending
    op.execute(
        routines.update()
        .where(routines.c.schedule_claims > 0)
        .values(schedule_starts=sa.case((seed > 0, seed), else_=sa.literal_column("0")))
    )


def upgrade() -> None:
    """Each part's block below."""
    # --- max_runs counts starts: routines.schedule_starts ---
    # The schedule fires STARTED (the start CAS counts them); a claim that never starts gives its
    # slot back. Seeded from the claims counted so far (_seed_starts).
    _add_column("routines", sa.Column("schedule_starts", sa.BigInteger(), nullable=False, server_default=sa.text("0")))
    _seed_starts()
    # --- end max_runs counts starts ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order (``schedule_claims``, still counted,
    is what the previous revision's code reads)."""
    # --- max_runs counts starts ---
    _drop_column("routines", "schedule_starts")
    # --- end max_runs counts starts ---
