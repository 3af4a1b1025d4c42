"""The tick log of :class:`~alma_schedule.stores.sql.SqlStore`: the upsert of the tick's minute
(with the prune of old minutes), the overview's read, and the end of a tick: ``record_tick`` (the
heartbeat and the minute in one step) and ``begin_tick_end`` (PostgreSQL starts it before the tick's
last sends: :mod:`..postgres.tick_end`; docs/architecture.md, section "The flow, from clock to ledger").
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime

from alma_schedule.model import TickEndAsk, TickEndParts, TickMinute
from alma_schedule.stores.backfill_args import log_tick_args
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.queries import ticklog
from alma_schedule.stores.sql.store_base import SqlBase
from alma_schedule.stores.validation import check_limit


class TickLogMixin(SqlBase):
    def log_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> None:
        now, claimed, lag_p50, lag_p95 = log_tick_args(now, claimed, lag_p50, lag_p95)
        # PostgreSQL: ONE statement (autocommit); SQLite: its two statements in one transaction
        with self._tx(single=True) as conn:
            for stmt in self._driver.tick_minute(self.dialect, now, claimed, lag_p50, lag_p95):
                conn.execute(stmt)

    def record_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> datetime | None:
        now, claimed, lag_p50, lag_p95 = log_tick_args(now, claimed, lag_p50, lag_p95)
        params = ticklog.record_tick_params(now, claimed, lag_p50, lag_p95)
        # PostgreSQL: ONE prepared statement (autocommit); SQLite: its three in one transaction
        return self._driver.record_tick(self._tx, self.dialect, params)

    def begin_tick_end(self, ask: TickEndAsk) -> AbstractContextManager[Callable[[], TickEndParts]]:
        """PostgreSQL: pipelined (:mod:`..postgres.tick_end`); SQLite: nothing starts early, every part None."""
        return self._driver.begin_tick_end(self._tx, ask)

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
