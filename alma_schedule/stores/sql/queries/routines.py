"""SQL statements of the store, routines: one row, the version history, listings, the back-off."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from alma_schedule.stores.sql.queries.common import NON_TERMINAL, in_states, routine_pk
from alma_schedule.stores.sql.schema import routine_versions, routines, runs


def select_routine(org: str, uid: str, routine_id: str, *, lock: bool = False) -> sa.Select[Any]:
    stmt = sa.select(routines).where(routine_pk(org, uid, routine_id))
    return stmt.with_for_update() if lock else stmt


def insert_routine(values: Mapping[str, Any]) -> Any:
    return sa.insert(routines).values(dict(values)).returning(*routines.c)


def update_routine(org: str, uid: str, routine_id: str, values: Mapping[str, Any], *, live_only: bool = False) -> Any:
    where = routine_pk(org, uid, routine_id)
    if live_only:
        where = sa.and_(where, routines.c.deleted_at.is_(None))
    return sa.update(routines).where(where).values(dict(values)).returning(*routines.c)


def list_routines(org: str, uid: str, *, include_deleted: bool, limit: int, after: str | None) -> sa.Select[Any]:
    stmt = sa.select(routines).where(routines.c.org == org, routines.c.uid == uid)
    if not include_deleted:
        stmt = stmt.where(routines.c.deleted_at.is_(None))
    if after is not None:
        stmt = stmt.where(routines.c.routine_id > after)
    return stmt.order_by(routines.c.routine_id).limit(limit)


def iter_routines_page(
    after: tuple[str, str, str] | None, batch: int, *, active_only: bool = False, lock: bool = False
) -> sa.Select[Any]:
    """Keyset pagination in key order (never an OFFSET, never everything at once)."""
    stmt = sa.select(routines)
    if after is not None:
        stmt = stmt.where(sa.tuple_(routines.c.org, routines.c.uid, routines.c.routine_id) > sa.tuple_(*after))
    if active_only:
        stmt = stmt.where(
            routines.c.deleted_at.is_(None), routines.c.enabled.is_(True), routines.c.paused_reason.is_(None)
        )
    stmt = stmt.order_by(routines.c.org, routines.c.uid, routines.c.routine_id).limit(batch)
    return stmt.with_for_update() if lock else stmt


def latest_version(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    """The newest entry of a routine's version history (number and revision)."""
    v = routine_versions.c
    return (
        sa.select(v.version, v.config_revision)
        .where(v.org == org, v.uid == uid, v.routine_id == routine_id)
        .order_by(v.version.desc())
        .limit(1)
    )


def insert_version(values: Mapping[str, Any]) -> Any:
    return sa.insert(routine_versions).values(dict(values))


def select_versions(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    v = routine_versions.c
    return sa.select(routine_versions).where(v.org == org, v.uid == uid, v.routine_id == routine_id).order_by(v.version)


def select_open_run(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    """The routine's non-terminal run, if any (at most one: the partial unique index)."""
    return sa.select(runs).where(
        runs.c.org == org, runs.c.uid == uid, runs.c.routine_id == routine_id, in_states(*NON_TERMINAL)
    )


def list_inactive(limit: int) -> sa.Select[Any]:
    return (
        sa.select(routines)
        .where(
            routines.c.deleted_at.is_(None),
            sa.or_(routines.c.enabled.is_(False), routines.c.paused_reason.is_not(None)),
        )
        .order_by(routines.c.org, routines.c.uid, routines.c.routine_id)
        .limit(limit)
    )
