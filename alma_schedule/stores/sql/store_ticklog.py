"""The tick log of :class:`~alma_schedule.stores.sql.SqlStore` (issue 17): the tick's upsert of its
minute with the prune of old minutes in ONE statement on PostgreSQL (ONE transaction on SQLite),
and the overview's read; and the end of a tick, ``record_tick``: the heartbeat (with the wake-up
hint) and the tick's minute, ONE statement on PostgreSQL (built once, :func:`.queries.ticklog.record_tick`)."""

from __future__ import annotations

from datetime import UTC, datetime

from alma_schedule.model import TickMinute
from alma_schedule.stores.backfill_args import log_tick_args
from alma_schedule.stores.sql import hot
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.queries import ticklog
from alma_schedule.stores.sql.store_base import SqlBase
from alma_schedule.stores.validation import check_limit


class TickLogMixin(SqlBase):
    def log_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> None:
        now, claimed, lag_p50, lag_p95 = log_tick_args(now, claimed, lag_p50, lag_p95)
        # PostgreSQL: ONE statement (autocommit); SQLite: its two statements in one transaction
        with self._tx(single=True) as conn:
            for stmt in q.log_tick_minute(self.dialect, now, claimed, lag_p50, lag_p95):
                conn.execute(stmt)

    def record_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> datetime | None:
        now, claimed, lag_p50, lag_p95 = log_tick_args(now, claimed, lag_p50, lag_p95)
        params = ticklog.record_tick_params(now, claimed, lag_p50, lag_p95)
        # PostgreSQL: ONE prepared statement (autocommit, .hot); SQLite: its three in one transaction
        with self._tx(single=self.dialect == "postgresql") as conn:
            first, *rest = ticklog.record_tick(self.dialect)
            if self.dialect == "postgresql":
                row = hot.one_row(conn, first, self.schema, params)
                at: datetime | None = row[0] if row is not None else None
                return at if at is None or at.tzinfo is UTC else at.astimezone(UTC)
            hint: datetime | None = conn.execute(first, params).scalar()
            for stmt in rest:
                conn.execute(stmt, params)
            return hint

    def count_routines(self, cap: int = 10_000) -> dict[str, int]:
        cap = check_limit("cap", cap)
        with self._tx(read=True) as conn:
            row = conn.execute(q.count_routines(cap)).one()
        return {"enabled": int(row.enabled), "paused": int(row.paused), "disabled": int(row.disabled)}

    def tick_log(self, limit: int = 60) -> list[TickMinute]:
        limit = check_limit("limit", limit)
        with self._tx(read=True) as conn:
            rows = conn.execute(q.select_tick_log(limit)).all()
        return [TickMinute(r.minute, r.ticks, r.claimed, r.lag_p50, r.lag_p95) for r in rows]
