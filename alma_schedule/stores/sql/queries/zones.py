"""SQL statements of the store, zone data: the one ``zone_state`` row (the zone data every routine's
next fire was last derived under, and how far a reconciliation has come), and its pages."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from alma_schedule.stores.sql.queries.common import _insert
from alma_schedule.stores.sql.schema import zone_state


def select_zone_state(*, lock: bool) -> sa.Select[Any]:
    """The row (locked on PostgreSQL: one reconciler at a time; SQLite's write lock already is)."""
    stmt = sa.select(
        zone_state.c.zone_data, zone_state.c.cursor_org, zone_state.c.cursor_uid, zone_state.c.cursor_routine_id
    ).where(zone_state.c.id == 1)
    return stmt.with_for_update() if lock else stmt


def save_zone_state(dialect: str, zone_data: str | None, cursor: tuple[str, str, str] | None) -> Any:
    """Upsert the row: the recorded zone data and the reconciliation's cursor (None: none running)."""
    org, uid, routine_id = cursor if cursor is not None else (None, None, None)
    values = {"zone_data": zone_data, "cursor_org": org, "cursor_uid": uid, "cursor_routine_id": routine_id}
    ins = _insert(dialect, zone_state).values(id=1, **values)
    return ins.on_conflict_do_update(
        index_elements=[zone_state.c.id], set_={k: getattr(ins.excluded, k) for k in values}
    )
