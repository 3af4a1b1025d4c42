"""SQL statements of the store, maintenance: last tick, prune, purge, erasure, reindex, schema version, lock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement

from alma_schedule.stores.sql.namespace import SCHEMA_TOKEN, VERSION_TABLE
from alma_schedule.stores.sql.queries.common import TERMINAL, Key3, Params, in_states, open_run_of_routine
from alma_schedule.stores.sql.queries.tick import ORDER_TAIL, _batch_update_routines, _pk_in
from alma_schedule.stores.sql.schema import heartbeat, routines, runs
from alma_schedule.stores.sql.types import UtcDateTime


def select_last_tick() -> sa.Select[Any]:
    return sa.select(heartbeat.c.last_tick).where(heartbeat.c.id == 1)


def prune(before: datetime) -> Any:
    return sa.delete(runs).where(in_states(*TERMINAL), runs.c.finished_at < before)


def purgeable() -> ColumnElement[bool]:
    """A tombstoned routine with no non-terminal run (also the tick probe's ``purge``)."""
    return sa.and_(routines.c.deleted_at.is_not(None), ~open_run_of_routine())


def purge_candidates(limit: int, *, lock: bool) -> sa.Select[Any]:
    """Tombstoned routines with no non-terminal run (locked, skipping rows others hold)."""
    stmt = (
        sa.select(routines.c.org, routines.c.uid, routines.c.routine_id)
        .where(purgeable())
        .order_by(routines.c.org, routines.c.uid, routines.c.routine_id)
        .limit(limit)
    )
    return stmt.with_for_update(skip_locked=True) if lock else stmt


def delete_of(table: sa.Table, keys: Sequence[Key3]) -> Any:
    return sa.delete(table).where(sa.tuple_(table.c.org, table.c.uid, table.c.routine_id).in_(list(keys)))


def erase_results(org: str, uid: str) -> Any:
    return (
        sa.update(runs)
        .where(runs.c.org == org, runs.c.uid == uid, runs.c.result_text.is_not(None))
        .values(result_text=None, erase_at=None)
    )


def erasable(now: datetime) -> ColumnElement[bool]:
    """A run whose ``erase_at`` has passed at ``now`` (also the tick probe's ``expired_results``): its
    result text is erased and its ``erase_at`` cleared. The predicate is the partial index's column
    alone.
    docs/architecture.md, section "The modules, in detail" (stores/sql/queries/maintenance.py).
    """
    return runs.c.erase_at <= now


def erase_expired(now: datetime, limit: int, dialect: str) -> Any:
    due = (
        sa.select(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
        .where(erasable(now))
        .order_by(runs.c.erase_at, *ORDER_TAIL)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return sa.update(runs).where(_pk_in(dialect, due)).values(result_text=None, erase_at=None)


def reindex_batch(dialect: str, rows: Sequence[Mapping[str, Any]], tzdata_version: str | None) -> tuple[Any, Params]:
    consts: dict[str, Any] = {}
    if tzdata_version is not None:
        consts["tzdata_version"] = tzdata_version
    return _batch_update_routines(
        dialect, "r", [("next_due_at", UtcDateTime())], rows, {"next_due_at": "next_due_at"}, consts
    )


# A Table (a lightweight sa.table() is not schema-translated), in a MetaData of its own: Alembic
# owns this table, it is not part of the declared schema.
_schedule_version = sa.Table(VERSION_TABLE, sa.MetaData(), sa.Column("version_num", sa.String(32)), schema=SCHEMA_TOKEN)


def select_schema_version() -> sa.Select[Any]:
    """The Alembic revision the store is at, from OUR version table in the namespace (a missing
    table means: not migrated; a fleet's ``alembic_version`` is never read)."""
    return sa.select(_schedule_version.c.version_num).limit(1)


#: The key of the PostgreSQL advisory lock that serialises migrations (any constant bigint).
MIGRATION_LOCK_KEY = 0x616C6D615F6D6967  # "alma_mig"


def advisory_lock() -> Any:
    """Try the migration lock (never waits: a waiting statement holds a snapshot, which a concurrent
    ``CREATE INDEX CONCURRENTLY`` of the lock holder would wait for: a deadlock)."""
    return sa.select(sa.func.pg_try_advisory_lock(sa.literal(MIGRATION_LOCK_KEY, sa.BigInteger)))


def try_advisory_lock() -> Any:
    """The migration lock without waiting (true when taken): a migrator polls it, so that no waiting
    statement holds a snapshot that another migrator's ``CREATE INDEX CONCURRENTLY`` would wait for
    (a deadlock)."""
    return sa.select(sa.func.pg_try_advisory_lock(sa.literal(MIGRATION_LOCK_KEY, sa.BigInteger)))


def advisory_unlock() -> Any:
    return sa.select(sa.func.pg_advisory_unlock(sa.literal(MIGRATION_LOCK_KEY, sa.BigInteger)))
