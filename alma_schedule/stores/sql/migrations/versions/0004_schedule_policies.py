"""The revision of schedule policies: buffered fires, limits, jitter, backfills, the wake-up hint.
Revision ID: 0004_schedule_policies
Revises: 0003_faults
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import ExecutableDDLElement

revision = "0004_schedule_policies"
down_revision = "0003_faults"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"
UTC_DATETIME = sa.DateTime(timezone=True)


def _postgres() -> bool:
    return bool(op.get_context().dialect.name == "postgresql")


def _add_column(table: str, column: sa.Column[Any]) -> None:
    """A new column, last in the table (nullable or with a constant default: no rewrite, no long
    lock). ``IF NOT EXISTS`` on PostgreSQL, where a concurrent index below commits mid-revision and a
    failed run is re-run; on SQLite the whole revision is one transaction."""
    op.add_column(table, column, schema=_alter_schema(), if_not_exists=True if _postgres() else None)


def _drop_index(name: str, table: str) -> None:
    op.drop_index(name, table, schema=SCHEMA, if_exists=True if _postgres() else None)


def _drop_column(table: str, column: str) -> None:
    """Drop a column this revision added (SQLite >= 3.35 drops it in place; the real table name:
    raw SQL is not translated from the placeholder schema)."""
    if _postgres():
        op.drop_column(table, column, schema=_alter_schema())
    else:
        op.execute(f"ALTER TABLE {_real(table)} DROP COLUMN {column}")


def _index_concurrently(
    name: str, table: str, columns: list[str], where: str | None = None, *, unique: bool = False
) -> None:
    """``CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS`` on PostgreSQL: outside a transaction, so
    old workers keep writing (the migration's session-level lock is still held); the revision's
    earlier changes are committed first (which is why every step of it is idempotent). A plain
    index on SQLite, the embedded store, inside the revision's transaction."""
    kw: dict[str, Any] = {"schema": SCHEMA, "unique": unique}
    if where is not None:
        kw["postgresql_where"] = sa.text(where)
        kw["sqlite_where"] = sa.text(where)
    if not _postgres():
        op.create_index(name, table, columns, **kw)
        return
    bind = op.get_bind()
    bind.commit()
    level = bind.get_isolation_level()
    bind.execution_options(isolation_level="AUTOCOMMIT")
    try:
        op.create_index(name, table, columns, postgresql_concurrently=True, if_not_exists=True, **kw)
    finally:
        bind.commit()  # ends SQLAlchemy's autobegun (autocommit) transaction so the level can change
        bind.execution_options(isolation_level=level)


class _Validate(ExecutableDDLElement):
    """``ALTER TABLE <runs> VALIDATE CONSTRAINT <name>`` (PostgreSQL), the table name translated."""

    inherit_cache = False

    def __init__(self, table: str, name: str) -> None:
        self.table = sa.Table(table, sa.MetaData(), schema=SCHEMA)  # a Table: the schema map applies
        self.name = name


@compiles(_Validate)
def _validate_sql(element: _Validate, compiler: Any, **kw: Any) -> str:
    table = compiler.preparer.format_table(element.table)
    return f"ALTER TABLE {table} VALIDATE CONSTRAINT {compiler.preparer.quote(element.name)}"


# --- buffered: overlap latest (the state ``buffered``, one buffered fire per routine) ---
BUFFERED_STATES = (
    "state IN ('claimed', 'running', 'submitted', 'collecting', "
    "'completed', 'failed', 'refused', 'skipped', 'timed_out', 'buffered')"
)
UNBUFFERED_STATES = (
    "state IN ('claimed', 'running', 'submitted', 'collecting', "
    "'completed', 'failed', 'refused', 'skipped', 'timed_out')"
)


def _runs_state_check(states: str, *, validate: bool) -> None:
    """Replace ``ck_runs_state`` by ``states``. PostgreSQL: drop and add ``NOT VALID`` in this
    transaction (no table scan under the exclusive lock), then ``VALIDATE`` (a scan that lets writes
    through). SQLite cannot alter a CHECK: a batch rebuild copies the runs table (the embedded
    store: one file, one writer; the copy holds the write lock for its duration)."""
    if _postgres():
        op.drop_constraint("ck_runs_state", "runs", schema=SCHEMA, type_="check")
        op.create_check_constraint("ck_runs_state", "runs", sa.text(states), schema=SCHEMA, postgresql_not_valid=True)
        if validate:
            op.execute(_Validate("runs", "ck_runs_state"))
        return
    # Batch mode reflects the table, which SQLite can only do under its real (prefixed) name.
    real = context.config.attributes["namespace"].table("runs")
    with op.batch_alter_table(real, recreate="always") as batch:
        batch.drop_constraint("ck_runs_state", type_="check")
        batch.create_check_constraint("ck_runs_state", sa.text(states))


def _buffered_upgrade() -> None:
    _runs_state_check(BUFFERED_STATES, validate=True)
    # A failed CONCURRENTLY build leaves an INVALID index: drop it first, so a re-run builds it again.
    if _postgres():
        _drop_index("uq_runs_one_buffered", "runs")
    _index_concurrently("uq_runs_one_buffered", "runs", ["org", "uid", "routine_id"], "state = 'buffered'", unique=True)


def _buffered_downgrade() -> None:
    _drop_index("uq_runs_one_buffered", "runs")
    # A buffered row cannot outlive the state: it ends skipped(missed) before the CHECK narrows.
    runs = sa.Table(  # a Table (not a table clause): the schema map applies to it
        "runs",
        sa.MetaData(),
        sa.Column("state", sa.String(16)),
        sa.Column("reason", sa.String(64)),
        sa.Column("state_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        schema=SCHEMA,
    )
    ended = {"state": "skipped", "reason": "missed", "finished_at": runs.c.state_at}
    op.execute(runs.update().where(runs.c.state == "buffered").values(ended))
    _runs_state_check(UNBUFFERED_STATES, validate=True)


# --- end buffered ---

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
    # --- wake-up hint and erroring routines: heartbeat.next_wake_at, ix_routines_erroring ---
    _add_column("heartbeat", sa.Column("next_wake_at", UTC_DATETIME, nullable=True))
    _index_concurrently(
        "ix_routines_erroring", "routines", ["defer_until", "org", "uid", "routine_id"], "last_error IS NOT NULL"
    )
    # --- end wake-up hint and erroring routines ---
    # --- zone data reconciliation: zone_state (the zone data the index was derived under) ---
    op.create_table(
        "zone_state",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("zone_data", sa.String(length=64), nullable=True),
        sa.Column("cursor_org", sa.String(length=200), nullable=True),
        sa.Column("cursor_uid", sa.String(length=200), nullable=True),
        sa.Column("cursor_routine_id", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.CheckConstraint("id = 1", name="ck_zone_state_one_row"),
        schema=SCHEMA,
        if_not_exists=True,
    )
    # --- end zone data reconciliation ---
    # --- window: max_runs (routines.schedule_claims) ---
    # The schedule fires claimed while the routine has max_runs; a constant default, so old
    # workers (which never name the column) keep inserting and updating routines.
    _add_column("routines", sa.Column("schedule_claims", sa.Integer, nullable=False, server_default=sa.text("0")))
    # --- end window ---
    # --- buffered: overlap latest ---
    _buffered_upgrade()
    # --- end buffered ---
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
    # --- jitter: runs.due_at (fire_at + the fire's jitter; NULL on rows written before it) ---
    _add_column("runs", sa.Column("due_at", UTC_DATETIME, nullable=True))
    # --- end jitter ---


def downgrade() -> None:
    """The blocks of :func:`upgrade` undone, in reverse order."""
    # --- jitter ---
    _drop_column("runs", "due_at")
    # --- end jitter ---
    # --- backfill ---
    op.execute(f"DELETE FROM {_real('runs')} WHERE origin = 'backfill'")
    _origin_check(ORIGINS_BEFORE)
    op.drop_index("ix_backfills_pending", table_name="backfills", schema=SCHEMA)
    op.drop_table("backfills", schema=SCHEMA)
    op.execute(f"ALTER TABLE {_real('routines')} DROP COLUMN pruned_through")  # SQLite >= 3.35
    # --- end backfill ---
    # --- buffered: overlap latest ---
    _buffered_downgrade()
    # --- end buffered ---
    # --- window: max_runs (routines.schedule_claims) ---
    _drop_column("routines", "schedule_claims")
    # --- end window ---
    # --- zone data reconciliation ---
    op.drop_table("zone_state", schema=SCHEMA)
    # --- end zone data reconciliation ---
    # --- wake-up hint and erroring routines ---
    _drop_index("ix_routines_erroring", "routines")
    _drop_column("heartbeat", "next_wake_at")
    # --- end wake-up hint and erroring routines ---
