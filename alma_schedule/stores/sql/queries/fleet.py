"""SQL statements of the fleet reads (:class:`~alma_schedule.stores.fleet.FleetStore`): ranges of
the primary key of ``routines`` only (``(org, uid, routine_id)``, code point order), each ``LIMIT``ed.

docs/architecture.md, section "The modules, in detail" (stores/sql/queries/fleet.py).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from alma_schedule.stores.sql.schema import routines

__all__ = ["fleet_routines", "next_scope"]

_ORG, _UID, _RID = routines.c.org, routines.c.uid, routines.c.routine_id


def next_scope(after: tuple[str, ...] | None, org: str | None) -> sa.Select[Any]:
    """The first scope after ``after`` (``org``'s only when given): ONE index entry of the primary key
    (one step of a loose index scan; the caller repeats it per scope)."""
    stmt = sa.select(_ORG, _UID)
    if org is not None:
        stmt = stmt.where(_ORG == org)
    if after is not None:
        stmt = stmt.where(sa.tuple_(_ORG, _UID) > sa.tuple_(*after))
    return stmt.order_by(_ORG, _UID).limit(1)


def fleet_routines(after: tuple[str, ...] | None, limit: int, org: str | None, uid: str | None) -> sa.Select[Any]:
    """Routines (deleted too) in key order after ``after``, within ``org`` / ``org, uid``: a primary key range."""
    stmt = sa.select(routines)
    if org is not None:
        stmt = stmt.where(_ORG == org)
    if uid is not None:
        stmt = stmt.where(_UID == uid)
    if after is not None:
        stmt = stmt.where(sa.tuple_(_ORG, _UID, _RID) > sa.tuple_(*after))
    return stmt.order_by(_ORG, _UID, _RID).limit(limit)
