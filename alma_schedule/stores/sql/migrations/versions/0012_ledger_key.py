"""The revision of the fleet dashboard (issue 51): the scope ledger's index carries its whole key.
Revision ID: 0012_ledger_key
Revises: 0011_calendars

The ledger lists a scope newest first by ``(fire_at, run_id, routine_id)`` and pages on that key;
``ix_runs_scope_fire`` held ``(org, uid, fire_at, run_id)`` only, so a page boundary inside a group
of runs sharing one instant (every routine of a scope firing at :00 shares the run id too) read the
whole group to sort it by ``routine_id``: 20,000 rows for a page of 50. ``ix_runs_scope_key`` holds
``(org, uid, fire_at, run_id, routine_id)`` and REPLACES it (built first, then the old one dropped:
the tick still maintains one ledger index per run insert; every read of the old one is a prefix of
the new one, so code of any revision keeps its plans). PostgreSQL: ``CREATE INDEX CONCURRENTLY``
and ``DROP INDEX CONCURRENTLY`` outside a transaction (workers keep writing; a failed build's
INVALID index is dropped first, as a re-run finds it); SQLite: in the revision's transaction.
"""

from __future__ import annotations

from typing import Any

from alembic import op

revision = "0012_ledger_key"
down_revision = "0011_calendars"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"
NEW, OLD = "ix_runs_scope_key", "ix_runs_scope_fire"
NEW_COLUMNS, OLD_COLUMNS = ["org", "uid", "fire_at", "run_id", "routine_id"], ["org", "uid", "fire_at", "run_id"]


def _postgres() -> bool:
    return bool(op.get_context().dialect.name == "postgresql")


def _swap(build: str, columns: list[str], drop: str) -> None:
    """Build index ``build`` on ``runs`` (``columns``), then drop index ``drop``."""
    if not _postgres():
        op.create_index(build, "runs", columns, schema=SCHEMA, if_not_exists=True)
        op.drop_index(drop, "runs", schema=SCHEMA, if_exists=True)
        return
    bind = op.get_bind()
    bind.commit()
    level = bind.get_isolation_level()
    bind.execution_options(isolation_level="AUTOCOMMIT")
    kw: dict[str, Any] = {"schema": SCHEMA, "postgresql_concurrently": True}
    try:
        op.drop_index(build, "runs", if_exists=True, **kw)  # a failed build's INVALID index (a re-run)
        op.create_index(build, "runs", columns, if_not_exists=True, **kw)
        op.drop_index(drop, "runs", if_exists=True, **kw)
    finally:
        bind.commit()  # ends SQLAlchemy's autobegun (autocommit) transaction so the level can change
        bind.execution_options(isolation_level=level)


def upgrade() -> None:
    _swap(NEW, NEW_COLUMNS, OLD)


def downgrade() -> None:
    _swap(OLD, OLD_COLUMNS, NEW)
