"""The audit trail of :class:`~alma_schedule.stores.sql.SqlStore`: the append every routine write
makes in its own transaction, a routine's history, and the retention's bounded prune.
docs/architecture.md, section "The modules, in detail" (stores/sql/store_events.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from alma_schedule.model import Scope
from alma_schedule.model.events import RoutineEvent
from alma_schedule.policies.audit import Entry
from alma_schedule.stores.sql.queries import events as qe
from alma_schedule.stores.sql.store_base import RKey, SqlBase
from alma_schedule.stores.validation import check_limit, check_routine_key, require_utc

__all__ = ["EventsMixin", "append"]


def append(conn: Connection, key: RKey, entry: Entry | None) -> None:
    """Append ``entry`` (None: the write changed nothing the trail records) in the caller's transaction."""
    if entry is not None:
        conn.execute(qe.append_event(key, entry))


def _event(row: Any) -> RoutineEvent:
    return RoutineEvent(*row)


class EventsMixin(SqlBase):
    def routine_events(self, scope: Scope, routine_id: str, *, limit: int = 100) -> list[RoutineEvent]:
        """A routine's audit trail, newest first (tenant read; a purged routine's rows too)."""
        key = check_routine_key(scope, routine_id)
        limit = check_limit("limit", limit)
        with self._tx(read=True) as conn:
            return [_event(r) for r in conn.execute(qe.select_events(*key, limit)).all()]

    def prune_events(self, before: datetime, limit: int) -> int:
        """System, ONE statement: delete up to ``limit`` events older than ``before``, oldest first."""
        before = require_utc("before", before)
        limit = check_limit("limit", limit)
        if limit == 0:
            return 0
        with self._tx(single=True) as conn:
            return int(conn.execute(qe.prune_events(before, limit)).rowcount)
