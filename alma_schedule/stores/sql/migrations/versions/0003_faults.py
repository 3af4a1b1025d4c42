"""The revision of faults and abuse: expand-only changes for a killed run's owner.
Revision ID: 0003_faults
Revises: 0002_own_namespace
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_faults"
down_revision = "0002_own_namespace"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"


def _alter_schema() -> str:
    """The schema to name in ``op.add_column`` / ``op.drop_column`` (shared by every block).

    Alembic renders ``ALTER TABLE`` with the schema name as given, outside SQLAlchemy's
    ``schema_translate_map``: on PostgreSQL give it the real schema the connection maps the
    placeholder to. SQLite's statements keep the placeholder (the engine rewrites it as sent).
    """
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return SCHEMA
    mapping = bind.get_execution_options().get("schema_translate_map") or {}
    return str(mapping.get(SCHEMA, SCHEMA))


def upgrade() -> None:
    """Each part's block below."""
    # --- blocked marker: a running run blocked at once (runs.blocked_at, runs.blocked_why) ---
    # Nullable, last in the table: an old worker neither reads nor writes them. No index: the
    # reads filter the non-terminal rows (one per routine at most), already indexed by state.
    schema = _alter_schema()
    op.add_column("runs", sa.Column("blocked_at", sa.DateTime(timezone=True), nullable=True), schema=schema)
    op.add_column("runs", sa.Column("blocked_why", sa.String(length=32), nullable=True), schema=schema)
    # --- end blocked marker ---
    # --- killed runs: the owner of a run (runs.owner, ix_runs_owner) ---
    # Nullable, last in the table: an old worker's start CAS leaves it NULL (never reported lost).
    op.add_column("runs", sa.Column("owner", sa.Text(), nullable=True), schema=_alter_schema())
    _owner_index()
    # --- end killed runs ---


def _owner_index() -> None:
    """``ix_runs_owner``: the running runs of one Celery request id (partial; text_pattern_ops so
    PostgreSQL serves ``owner LIKE 'id/%'``), CONCURRENTLY on PostgreSQL (no lock on runs)."""
    bind = op.get_bind()
    where = "state = 'running' AND owner IS NOT NULL"
    if bind.dialect.name != "postgresql":
        op.create_index("ix_runs_owner", "runs", ["owner"], sqlite_where=sa.text(where), schema=SCHEMA)
        return
    bind.commit()
    level = bind.get_isolation_level()
    bind.execution_options(isolation_level="AUTOCOMMIT")
    try:
        op.create_index(
            "ix_runs_owner",
            "runs",
            ["owner"],
            postgresql_where=sa.text(where),
            postgresql_ops={"owner": "text_pattern_ops"},
            postgresql_concurrently=True,
            if_not_exists=True,
            schema=SCHEMA,
        )
    finally:
        bind.commit()
        bind.execution_options(isolation_level=level)


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- killed runs ---
    op.drop_index("ix_runs_owner", table_name="runs", schema=SCHEMA)
    op.drop_column("runs", "owner", schema=_alter_schema())
    # --- end killed runs ---
    # --- blocked marker ---
    schema = _alter_schema()
    op.drop_column("runs", "blocked_why", schema=schema)
    op.drop_column("runs", "blocked_at", schema=schema)
    # --- end blocked marker ---
