"""The SQL schema: ONE :class:`~sqlalchemy.MetaData` with every table, constraint and index.
docs/architecture.md, section "The modules, in detail" (stores/sql/schema.py).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa

from alma_schedule.model.run import ACTIVE, NON_TERMINAL, RunState
from alma_schedule.stores.sql.namespace import SCHEMA_TOKEN
from alma_schedule.stores.sql.types import Json, UtcDateTime

#: The Alembic revision this code expects (one revision per issue; a test checks there is ONE head).
HEAD_REVISION = "0012_ledger_key"

ID = sa.String(200)


def state_in(states: Collection[str]) -> str:
    """``state IN ('a', 'b')`` of a set of run states, in the table's order (the text is stable)."""
    return "state IN (" + ", ".join(f"'{s.value}'" for s in RunState if s in states) + ")"


NON_TERMINAL_SQL = state_in(NON_TERMINAL)
ACTIVE_SQL = state_in(ACTIVE)
STATES_SQL = state_in(frozenset(RunState))
#: The origins a run row may have (0004_schedule_policies added ``backfill``; the migration repeats the literal).
ORIGINS_SQL = "origin IN ('schedule', 'manual', 'backfill')"


def _where(sql: str) -> dict[str, Any]:
    return {"postgresql_where": sa.text(sql), "sqlite_where": sa.text(sql)}


metadata = sa.MetaData(schema=SCHEMA_TOKEN)

routines = sa.Table(
    "routines",
    metadata,
    sa.Column("org", ID, primary_key=True),
    sa.Column("uid", ID, primary_key=True),
    sa.Column("routine_id", ID, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("schedule", Json, nullable=False),
    sa.Column("definition", Json, nullable=False),
    sa.Column("registered_at", UtcDateTime, nullable=False),
    sa.Column("config_revision", sa.String(128), nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("paused_reason", sa.Text, nullable=True),
    sa.Column("consecutive_failures", sa.Integer, nullable=False),
    sa.Column("last_fire", UtcDateTime, nullable=True),
    sa.Column("next_due_at", UtcDateTime, nullable=True),
    sa.Column("deleted_at", UtcDateTime, nullable=True),
    sa.Column("defer_until", UtcDateTime, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("error_count", sa.Integer, nullable=False),
    sa.Column("tzdata_version", sa.String(32), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    # 0004_schedule_policies: schedule fires claimed while max_runs is set (information
    # only since 0008_hardening: max_runs counts schedule_starts, below)
    sa.Column("schedule_claims", sa.Integer, nullable=False, server_default=sa.text("0")),
    # --- backfill: the latest pruned fire (a backfill reaches only fires after it) ---
    sa.Column("pruned_through", UtcDateTime, nullable=True),
    # --- 0007_on_time: the fires claims collapsed (policies.missed), and whether one
    # claim's count reached the cap (shown "10,000+")
    sa.Column("fires_missed", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    sa.Column("fires_missed_capped", sa.Boolean, nullable=False, server_default=sa.false()),
    # --- 0008_hardening: max_runs' count, the schedule fires STARTED (policies.limits),
    # written by the start CAS's own statement
    sa.Column("schedule_starts", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    # --- 0009_adoption: provenance (model.provenance) and why a disabled routine is disabled
    sa.Column("source", sa.Text, nullable=True),
    sa.Column("source_entry", sa.Text, nullable=True),
    sa.Column("disabled_reason", sa.Text, nullable=True),
)
# The tick's index: only routines that can come due are in it (NULL while paused/disabled/deleted).
sa.Index(
    "ix_routines_due",
    routines.c.next_due_at,
    routines.c.org,
    routines.c.uid,
    routines.c.routine_id,
    **_where("next_due_at IS NOT NULL"),
)
sa.Index(
    "ix_routines_inactive",
    routines.c.org,
    routines.c.uid,
    routines.c.routine_id,
    **_where("deleted_at IS NULL AND (enabled = false OR paused_reason IS NOT NULL)"),
)
sa.Index("ix_routines_deleted", routines.c.deleted_at, **_where("deleted_at IS NOT NULL"))
# The routines that carry a planning error (reported on every tick while they fail), by next attempt.
sa.Index(
    "ix_routines_erroring",
    routines.c.defer_until,
    routines.c.org,
    routines.c.uid,
    routines.c.routine_id,
    **_where("last_error IS NOT NULL"),
)

routine_versions = sa.Table(
    "routine_versions",
    metadata,
    sa.Column("org", ID, primary_key=True),
    sa.Column("uid", ID, primary_key=True),
    sa.Column("routine_id", ID, primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("config_revision", sa.String(128), nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("schedule", Json, nullable=False),
    sa.Column("definition", Json, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("org", ID, primary_key=True),
    sa.Column("uid", ID, primary_key=True),
    sa.Column("routine_id", ID, primary_key=True),
    sa.Column("run_id", ID, primary_key=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("origin", sa.String(16), nullable=False),
    sa.Column("config_revision", sa.String(128), nullable=False),
    sa.Column("fire_at", UtcDateTime, nullable=False),
    sa.Column("claimed_at", UtcDateTime, nullable=False),
    sa.Column("state_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Column("reason", sa.String(64), nullable=True),
    sa.Column("started_at", UtcDateTime, nullable=True),
    sa.Column("submitted_at", UtcDateTime, nullable=True),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.Column("resend_at", UtcDateTime, nullable=True),
    sa.Column("send_attempts", sa.Integer, nullable=False),
    sa.Column("next_poll_at", UtcDateTime, nullable=True),
    sa.Column("poll_attempts", sa.Integer, nullable=False),
    sa.Column("deadline", UtcDateTime, nullable=True),
    sa.Column("target_task_id", sa.Text, nullable=True),
    sa.Column("error_class", sa.Text, nullable=True),
    sa.Column("reserved_micros", sa.BigInteger, nullable=False),
    sa.Column("reserve_day", sa.String(10), nullable=True),
    sa.Column("reserve_ceilings", Json, nullable=False),
    sa.Column("cost_micros", sa.BigInteger, nullable=False),
    sa.Column("caps_crossed", Json, nullable=False),
    sa.Column("session_id", sa.Text, nullable=True),
    sa.Column("turn_id", sa.Text, nullable=True),
    sa.Column("batch_id", sa.Text, nullable=True),
    sa.Column("delivery_hash", sa.Text, nullable=True),
    sa.Column("result_text", sa.Text, nullable=True),
    sa.Column("erase_at", UtcDateTime, nullable=True),
    # 0003_faults, the blocked marker: a running run blocked at once (model.BlockedWhy)
    sa.Column("blocked_at", UtcDateTime, nullable=True),
    sa.Column("blocked_why", sa.String(32), nullable=True),
    # 0003_faults, the owner of a run: who took claimed -> running (policies.ownership)
    sa.Column("owner", sa.Text, nullable=True),
    sa.Column("due_at", UtcDateTime, nullable=True),  # jitter: fire_at + the fire's jitter
    sa.CheckConstraint(STATES_SQL, name="ck_runs_state"),
    sa.CheckConstraint(ORIGINS_SQL, name="ck_runs_origin"),
)
# Guarantee 2: at most ONE non-terminal run per routine, enforced by the database.
sa.Index(
    "uq_runs_one_active",
    runs.c.org,
    runs.c.uid,
    runs.c.routine_id,
    unique=True,
    **_where(NON_TERMINAL_SQL),
)
# Overlap latest: at most ONE buffered fire per routine (outside uq_runs_one_active; 0004_schedule_policies).
sa.Index(
    "uq_runs_one_buffered",
    runs.c.org,
    runs.c.uid,
    runs.c.routine_id,
    unique=True,
    **_where("state = 'buffered'"),
)
# The sweeps of the tick: re-sends, expiries, polls (each over a handful of non-terminal rows).
sa.Index("ix_runs_resend", runs.c.resend_at, **_where("state = 'claimed'"))
sa.Index("ix_runs_expires", runs.c.expires_at, **_where("state = 'claimed'"))
sa.Index("ix_runs_poll", runs.c.next_poll_at, **_where("state = 'submitted'"))
sa.Index("ix_runs_active_since", runs.c.state_at, **_where(ACTIVE_SQL))
# 0003_faults: Celery's loss report finds the running runs of one request id
# (``owner = id OR owner LIKE 'id/%'``: text_pattern_ops on PostgreSQL serves the prefix).
sa.Index(
    "ix_runs_owner",
    runs.c.owner,
    postgresql_ops={"owner": "text_pattern_ops"},
    **_where("state = 'running' AND owner IS NOT NULL"),
)
# Maintenance: result erasure and pruning of finished rows.
sa.Index("ix_runs_erase", runs.c.erase_at, **_where("erase_at IS NOT NULL"))
sa.Index("ix_runs_finished", runs.c.finished_at, **_where("finished_at IS NOT NULL"))
# The ledger, newest first: per scope, and per routine.
# Its whole paging key (revision 0012_ledger_key replaced ix_runs_scope_fire, which lacked routine_id).
sa.Index("ix_runs_scope_key", runs.c.org, runs.c.uid, runs.c.fire_at, runs.c.run_id, runs.c.routine_id)
sa.Index("ix_runs_routine_fire", runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.fire_at)
# PostgreSQL also holds functional-dependency statistics on runs (org, uid, routine_id), so that a
# read of one run by its key is priced through the primary key, never through the routine's ledger
# in ix_runs_routine_fire: revision 0006_speed (``st_runs_routine``; not a SQLAlchemy object).

spend = sa.Table(
    "spend",
    metadata,
    sa.Column("ceiling_key", sa.Text, primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("reserved_micros", sa.BigInteger, nullable=False),
    sa.Column("settled_micros", sa.BigInteger, nullable=False),
)

#: The zone data (``core.zones.zone_data``) every routine's next fire was last derived under, and
#: the key a reconciliation in progress has reached (one row).
zone_state = sa.Table(
    "zone_state",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("zone_data", sa.String(64), nullable=True),
    sa.Column("cursor_org", ID, nullable=True),
    sa.Column("cursor_uid", ID, nullable=True),
    sa.Column("cursor_routine_id", ID, nullable=True),
    sa.CheckConstraint("id = 1", name="ck_zone_state_one_row"),
)
# --- backfill: one operator range per routine; the tick reads only the pending ones ---
backfills = sa.Table(
    "backfills",
    metadata,
    sa.Column("org", ID, primary_key=True),
    sa.Column("uid", ID, primary_key=True),
    sa.Column("routine_id", ID, primary_key=True),
    sa.Column("from_at", UtcDateTime, nullable=False),
    sa.Column("to_at", UtcDateTime, nullable=False),
    sa.Column("next_at", UtcDateTime, nullable=True),
    sa.Column("max_fires", sa.Integer, nullable=False),
    sa.Column("cancelled_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
)
#: The predicate of a pending backfill (the tick's one read when there is none).
BACKFILL_PENDING_SQL = "cancelled_at IS NULL AND next_at IS NOT NULL"
sa.Index("ix_backfills_pending", backfills.c.next_at, **_where(BACKFILL_PENDING_SQL))
# --- end backfill ---

heartbeat = sa.Table(
    "heartbeat",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("last_tick", UtcDateTime, nullable=False),
    sa.Column("next_wake_at", UtcDateTime, nullable=True),  # the wake-up hint of the last tick
    sa.CheckConstraint("id = 1", name="ck_heartbeat_one_row"),
)

# --- the tick log (revision 0005_dashboard): one row per minute, pruned after 7 days ---
tick_log = sa.Table(
    "tick_log",
    metadata,
    sa.Column("minute", UtcDateTime, primary_key=True),
    sa.Column("ticks", sa.Integer, nullable=False),
    sa.Column("claimed", sa.Integer, nullable=False),
    sa.Column("lag_p50", sa.Float, nullable=True),
    sa.Column("lag_p95", sa.Float, nullable=True),
)
# --- end the tick log ---

# --- audit trail (revision 0010_history): routine_events, append-only (policies.audit) ---
routine_events = sa.Table(
    "routine_events",
    metadata,
    sa.Column("event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("org", ID, nullable=False),
    sa.Column("uid", ID, nullable=False),
    sa.Column("routine_id", ID, nullable=False),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.Column("actor", sa.Text, nullable=True),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("diff", Json, nullable=True),
)
# A routine's history in order, and the retention's prune (oldest first).
sa.Index(
    "ix_routine_events_routine",
    routine_events.c.org,
    routine_events.c.uid,
    routine_events.c.routine_id,
    routine_events.c.at,
    routine_events.c.event_id,
)
sa.Index("ix_routine_events_at", routine_events.c.at, routine_events.c.event_id)
# --- end audit trail ---

# --- did-not-run alarm (revision 0011_calendars): routines with ``expect``, and each alert's delivery ---
#: The predicate of a live routine whose schedule has ``expect`` (each dialect's JSON text; the
#: overdue read repeats it so the partial index serves it).
EXPECT_SQL = {
    "postgresql": "(schedule ->> 'expect') IS NOT NULL AND deleted_at IS NULL",
    "sqlite": "json_extract(schedule, '$.expect') IS NOT NULL AND deleted_at IS NULL",
}
sa.Index(
    "ix_routines_expect",
    routines.c.org,
    routines.c.uid,
    routines.c.routine_id,
    postgresql_where=sa.text(EXPECT_SQL["postgresql"]),
    sqlite_where=sa.text(EXPECT_SQL["sqlite"]),
)
# One row per overdue fire an alert was sent for: its attempts, the lease of its task, and the 2xx.
overdue_alerts = sa.Table(
    "overdue_alerts",
    metadata,
    sa.Column("org", ID, primary_key=True),
    sa.Column("uid", ID, primary_key=True),
    sa.Column("routine_id", ID, primary_key=True),
    sa.Column("fire_at", UtcDateTime, primary_key=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("next_attempt_at", UtcDateTime, nullable=False),
    sa.Column("delivered_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
)
# --- end did-not-run alarm ---

# --- calendars (revision 0011_calendars): business calendars, system data, read whole by the tick ---
calendars = sa.Table(
    "calendars",
    metadata,
    sa.Column("name", sa.String(63), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("spec", Json, nullable=False),  # country, subdiv, market, weekend, add, remove
    sa.Column("holidays", Json, nullable=False),  # [[ISO date, name], ...] in date order
    sa.Column("first_year", sa.Integer, nullable=False),
    sa.Column("last_year", sa.Integer, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)
# --- end calendars ---
