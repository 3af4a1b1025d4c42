"""The initial schema: routines, routine_versions, runs, spend, heartbeat.
Revision ID: 0001_initial
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"
UTC_DATETIME = sa.DateTime(timezone=True)
ID = sa.String(length=200)


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _where(sql: str) -> dict[str, Any]:
    return {"postgresql_where": sa.text(sql), "sqlite_where": sa.text(sql), "schema": SCHEMA}


NON_TERMINAL = "state IN ('claimed', 'running', 'submitted', 'collecting')"
ACTIVE = "state IN ('running', 'submitted', 'collecting')"
STATES = (
    "state IN ('claimed', 'running', 'submitted', 'collecting', "
    "'completed', 'failed', 'refused', 'skipped', 'timed_out')"
)


def upgrade() -> None:
    op.create_table(
        "routines",
        sa.Column("org", ID, nullable=False),
        sa.Column("uid", ID, nullable=False),
        sa.Column("routine_id", ID, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("schedule", _json(), nullable=False),
        sa.Column("definition", _json(), nullable=False),
        sa.Column("registered_at", UTC_DATETIME, nullable=False),
        sa.Column("config_revision", sa.String(length=128), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("last_fire", UTC_DATETIME, nullable=True),
        sa.Column("next_due_at", UTC_DATETIME, nullable=True),
        sa.Column("deleted_at", UTC_DATETIME, nullable=True),
        sa.Column("defer_until", UTC_DATETIME, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("error_count", sa.Integer(), nullable=False),
        sa.Column("tzdata_version", sa.String(length=32), nullable=True),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("org", "uid", "routine_id"),
        schema=SCHEMA,
    )
    op.create_index(
        "ix_routines_due", "routines", ["next_due_at", "org", "uid", "routine_id"], **_where("next_due_at IS NOT NULL")
    )
    op.create_index(
        "ix_routines_inactive",
        "routines",
        ["org", "uid", "routine_id"],
        **_where("deleted_at IS NULL AND (enabled = false OR paused_reason IS NOT NULL)"),
    )
    op.create_index("ix_routines_deleted", "routines", ["deleted_at"], **_where("deleted_at IS NOT NULL"))

    op.create_table(
        "routine_versions",
        sa.Column("org", ID, nullable=False),
        sa.Column("uid", ID, nullable=False),
        sa.Column("routine_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("config_revision", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("schedule", _json(), nullable=False),
        sa.Column("definition", _json(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("org", "uid", "routine_id", "version"),
        schema=SCHEMA,
    )

    op.create_table(
        "runs",
        sa.Column("org", ID, nullable=False),
        sa.Column("uid", ID, nullable=False),
        sa.Column("routine_id", ID, nullable=False),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("config_revision", sa.String(length=128), nullable=False),
        sa.Column("fire_at", UTC_DATETIME, nullable=False),
        sa.Column("claimed_at", UTC_DATETIME, nullable=False),
        sa.Column("state_at", UTC_DATETIME, nullable=False),
        sa.Column("expires_at", UTC_DATETIME, nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=True),
        sa.Column("started_at", UTC_DATETIME, nullable=True),
        sa.Column("submitted_at", UTC_DATETIME, nullable=True),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.Column("resend_at", UTC_DATETIME, nullable=True),
        sa.Column("send_attempts", sa.Integer(), nullable=False),
        sa.Column("next_poll_at", UTC_DATETIME, nullable=True),
        sa.Column("poll_attempts", sa.Integer(), nullable=False),
        sa.Column("deadline", UTC_DATETIME, nullable=True),
        sa.Column("target_task_id", sa.Text(), nullable=True),
        sa.Column("error_class", sa.Text(), nullable=True),
        sa.Column("reserved_micros", sa.BigInteger(), nullable=False),
        sa.Column("reserve_day", sa.String(length=10), nullable=True),
        sa.Column("reserve_ceilings", _json(), nullable=False),
        sa.Column("cost_micros", sa.BigInteger(), nullable=False),
        sa.Column("caps_crossed", _json(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("turn_id", sa.Text(), nullable=True),
        sa.Column("batch_id", sa.Text(), nullable=True),
        sa.Column("delivery_hash", sa.Text(), nullable=True),
        sa.Column("result_text", sa.Text(), nullable=True),
        sa.Column("erase_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(STATES, name="ck_runs_state"),
        sa.CheckConstraint("origin IN ('schedule', 'manual')", name="ck_runs_origin"),
        sa.PrimaryKeyConstraint("org", "uid", "routine_id", "run_id"),
        schema=SCHEMA,
    )
    op.create_index("uq_runs_one_active", "runs", ["org", "uid", "routine_id"], unique=True, **_where(NON_TERMINAL))
    op.create_index("ix_runs_resend", "runs", ["resend_at"], **_where("state = 'claimed'"))
    op.create_index("ix_runs_expires", "runs", ["expires_at"], **_where("state = 'claimed'"))
    op.create_index("ix_runs_poll", "runs", ["next_poll_at"], **_where("state = 'submitted'"))
    op.create_index("ix_runs_active_since", "runs", ["state_at"], **_where(ACTIVE))
    op.create_index("ix_runs_erase", "runs", ["erase_at"], **_where("erase_at IS NOT NULL"))
    op.create_index("ix_runs_finished", "runs", ["finished_at"], **_where("finished_at IS NOT NULL"))
    op.create_index("ix_runs_scope_fire", "runs", ["org", "uid", "fire_at", "run_id"], schema=SCHEMA)
    op.create_index("ix_runs_routine_fire", "runs", ["org", "uid", "routine_id", "fire_at"], schema=SCHEMA)

    op.create_table(
        "spend",
        sa.Column("ceiling_key", sa.Text(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("reserved_micros", sa.BigInteger(), nullable=False),
        sa.Column("settled_micros", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("ceiling_key", "day"),
        schema=SCHEMA,
    )

    op.create_table(
        "heartbeat",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("last_tick", UTC_DATETIME, nullable=False),
        sa.CheckConstraint("id = 1", name="ck_heartbeat_one_row"),
        sa.PrimaryKeyConstraint("id"),
        schema=SCHEMA,
    )


def downgrade() -> None:
    for table in ("heartbeat", "spend", "runs", "routine_versions", "routines"):
        op.drop_table(table, schema=SCHEMA)
