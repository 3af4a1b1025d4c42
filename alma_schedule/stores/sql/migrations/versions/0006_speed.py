"""Issue 16's revision (speed): what the planner needs to read one run by its key.

Revision ID: 0006_speed
Revises: 0005_dashboard
Create Date: 2026-12-04

The project's rules for a revision: ONE revision per issue (later changes of issue 16 go here);
expand-only and safe while old workers run; every table in the placeholder schema ``SCHEMA``. Each
part of the issue adds its block, delimited by a comment.

The run key's statistics (PostgreSQL; SQLite has no planner statistics to extend): a read of one run
by its key (``store.get``, a collect's poll, the start's loser, a locked read) has four equality
conditions, the primary key's columns. With each column's statistics taken as independent, the
planner priced the three it shares with ``ix_runs_routine_fire`` (org, uid, routine_id: in fact
one routine) at one row as well, and the cheaper of two one-row index scans won: the routine's
index, read through the routine's whole ledger with ``run_id`` as a filter (a routine that fired
every minute for a month: 43,000 entries read for one run). Functional-dependency statistics on
(org, uid, routine_id) tell it that the three name one routine (and a user one org), so it prices
the routine's index at the routine's ledger and the primary key wins
(``tests/stores/test_sql_statistics.py``). ``CREATE STATISTICS`` takes a SHARE UPDATE EXCLUSIVE lock
(old workers read and write on); the ``ANALYZE`` that fills it reads a sample of the table (300 x
``default_statistics_target`` rows), not all of it, under the same lock.
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
