"""Every SQL statement of the store, as named builders (SQLAlchemy Core). No SQL lives elsewhere:
one module per part of the store, re-exported here (``from alma_schedule.stores.sql import queries as q``).

Builders return a statement, or ``(statement, parameters)`` for batched ones; the store only
executes them. Dialect differences are confined here: PostgreSQL batches through ``unnest`` of
array parameters (one statement text whatever the batch size, so plans and compiled forms are
cached) and ``FOR UPDATE SKIP LOCKED``; SQLite batches through ``executemany`` / row-value ``IN``
lists and needs no row locks (every write transaction is ``BEGIN IMMEDIATE``).

State predicates are rendered as SQL literals (never bound), matching the partial indexes of
:mod:`.schema`, so generic plans can use those indexes.
"""

from __future__ import annotations

from alma_schedule.stores.sql.queries.backfills import (
    any_pending_backfill,
    cancel_backfill,
    claimable_backfills,
    move_backfills,
    prune_returning,
    put_backfill,
    raise_pruned_through,
    select_backfill,
    skip_claimed_backfill_run,
    system_routine_counts,
    system_routines,
)
from alma_schedule.stores.sql.queries.buffered import (
    HAS_BUFFERED,
    SELECT_BUFFERED_LOCKED,
    buffered_params,
    ending_cas,
    expirable,
    lock_open_runs,
    replace_buffered,
)
from alma_schedule.stores.sql.queries.claim import (
    HELD_LOCK_WAIT,
    advance_cursors,
    due_exists,
    select_due,
    supersede,
)
from alma_schedule.stores.sql.queries.claim_moves import count_claims, defer_batch, move_due
from alma_schedule.stores.sql.queries.common import (
    ACTIVE,
    NON_TERMINAL,
    TERMINAL,
    Key3,
    Params,
    dt,
    in_states,
    lit,
    routine_pk,
)
from alma_schedule.stores.sql.queries.finish import finish_statement
from alma_schedule.stores.sql.queries.inserts import (
    FIRE_VARYING,
    Columns,
    insert_records,
    insert_runs,
    patch_columns,
    record_columns,
)
from alma_schedule.stores.sql.queries.maintenance import (
    MIGRATION_LOCK_KEY,
    advisory_lock,
    advisory_unlock,
    delete_of,
    erase_expired,
    erase_results,
    prune,
    purge_candidates,
    reindex_batch,
    select_last_tick,
    select_schema_version,
    try_advisory_lock,
)
from alma_schedule.stores.sql.queries.money import reserve_upsert, select_spend, spend_adjust
from alma_schedule.stores.sql.queries.probe import FLAGS as PROBE_FLAGS
from alma_schedule.stores.sql.queries.probe import tick_probe
from alma_schedule.stores.sql.queries.reads import blocked, last_completed_delivery, list_runs, stuck
from alma_schedule.stores.sql.queries.routines import (
    insert_routine,
    insert_version,
    iter_routines_page,
    latest_version,
    list_inactive,
    list_routines,
    select_open_run,
    select_routine,
    select_versions,
    update_routine,
)
from alma_schedule.stores.sql.queries.runs import (
    MARK_BLOCKED,
    RUNNING_OF,
    SELECT_RUN,
    SELECT_RUN_LOCKED,
    SELECT_RUN_WITH_ROUTINE,
    cas,
    existing_runs,
    insert_run,
    like_prefix,
    run_params,
    start_cas,
)
from alma_schedule.stores.sql.queries.tick import (
    ORDER_TAIL,
    expire_claimed,
    peek_expiring,
    peek_runs,
    set_next_polls,
    take_polls,
    take_resends,
)
from alma_schedule.stores.sql.queries.ticklog import (
    count_routines,
    log_tick_minute,
    prune_tick_log,
    select_tick_log,
    upsert_tick_minute,
)
from alma_schedule.stores.sql.queries.wake import (
    erroring,
    record_heartbeat,
    select_next_wake,
    select_wake_hint,
    wake_hint,
)
from alma_schedule.stores.sql.queries.zones import save_zone_state, select_zone_state

__all__ = [
    "ACTIVE",
    "FIRE_VARYING",
    "HAS_BUFFERED",
    "Key3",
    "MIGRATION_LOCK_KEY",
    "NON_TERMINAL",
    "ORDER_TAIL",
    "Params",
    "MARK_BLOCKED",
    "SELECT_BUFFERED_LOCKED",
    "RUNNING_OF",
    "SELECT_RUN",
    "SELECT_RUN_LOCKED",
    "SELECT_RUN_WITH_ROUTINE",
    "finish_statement",
    "TERMINAL",
    "advance_cursors",
    "count_claims",
    "advisory_lock",
    "advisory_unlock",
    "blocked",
    "buffered_params",
    "any_pending_backfill",
    "cancel_backfill",
    "cas",
    "claimable_backfills",
    "defer_batch",
    "delete_of",
    "dt",
    "ending_cas",
    "erase_expired",
    "erase_results",
    "existing_runs",
    "expirable",
    "expire_claimed",
    "in_states",
    "insert_routine",
    "insert_run",
    "insert_records",
    "patch_columns",
    "record_columns",
    "Columns",
    "insert_runs",
    "insert_version",
    "iter_routines_page",
    "last_completed_delivery",
    "latest_version",
    "list_inactive",
    "list_routines",
    "list_runs",
    "lit",
    "move_backfills",
    "move_due",
    "peek_expiring",
    "peek_runs",
    "prune",
    "prune_returning",
    "purge_candidates",
    "put_backfill",
    "raise_pruned_through",
    "record_heartbeat",
    "save_zone_state",
    "select_zone_state",
    "erroring",
    "select_next_wake",
    "set_next_polls",
    "select_wake_hint",
    "wake_hint",
    "reindex_batch",
    "lock_open_runs",
    "replace_buffered",
    "reserve_upsert",
    "routine_pk",
    "like_prefix",
    "run_params",
    "select_backfill",
    "select_due",
    "due_exists",
    "HELD_LOCK_WAIT",
    "select_last_tick",
    "select_open_run",
    "select_routine",
    "select_schema_version",
    "select_spend",
    "select_versions",
    "skip_claimed_backfill_run",
    "spend_adjust",
    "start_cas",
    "stuck",
    "supersede",
    "system_routine_counts",
    "system_routines",
    "take_polls",
    "take_resends",
    "try_advisory_lock",
    "update_routine",
    "upsert_tick_minute",
    "log_tick_minute",
    "PROBE_FLAGS",
    "tick_probe",
    "prune_tick_log",
    "select_tick_log",
    "count_routines",
]
