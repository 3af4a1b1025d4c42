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
)
from alma_schedule.stores.sql.queries.money import reserve_upsert, select_spend, spend_adjust
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
    SELECT_RUN,
    SELECT_RUN_LOCKED,
    SELECT_RUN_WITH_ROUTINE,
    START_CAS,
    cas,
    insert_run,
    run_params,
)
from alma_schedule.stores.sql.queries.tick import (
    FIRE_VARYING,
    ORDER_TAIL,
    advance_cursors,
    defer_batch,
    existing_runs,
    expire_claimed,
    insert_runs,
    move_due,
    peek_runs,
    select_due,
    set_next_polls,
    supersede,
    take_polls,
    take_resends,
)
from alma_schedule.stores.sql.queries.ticklog import (
    count_routines,
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
    "Key3",
    "MIGRATION_LOCK_KEY",
    "NON_TERMINAL",
    "ORDER_TAIL",
    "Params",
    "SELECT_RUN",
    "SELECT_RUN_LOCKED",
    "SELECT_RUN_WITH_ROUTINE",
    "START_CAS",
    "TERMINAL",
    "advance_cursors",
    "advisory_lock",
    "advisory_unlock",
    "blocked",
    "cas",
    "defer_batch",
    "delete_of",
    "dt",
    "erase_expired",
    "erase_results",
    "existing_runs",
    "expire_claimed",
    "in_states",
    "insert_routine",
    "insert_run",
    "insert_runs",
    "insert_version",
    "iter_routines_page",
    "last_completed_delivery",
    "latest_version",
    "list_inactive",
    "list_routines",
    "list_runs",
    "lit",
    "move_due",
    "peek_runs",
    "prune",
    "purge_candidates",
    "record_heartbeat",
    "save_zone_state",
    "select_zone_state",
    "erroring",
    "select_next_wake",
    "set_next_polls",
    "select_wake_hint",
    "wake_hint",
    "reindex_batch",
    "reserve_upsert",
    "routine_pk",
    "run_params",
    "select_due",
    "select_last_tick",
    "select_open_run",
    "select_routine",
    "select_schema_version",
    "select_spend",
    "select_versions",
    "spend_adjust",
    "stuck",
    "supersede",
    "take_polls",
    "take_resends",
    "update_routine",
    "upsert_tick_minute",
    "prune_tick_log",
    "select_tick_log",
    "count_routines",
]
