"""The memory store's reads for the dashboard: the tick log (one row per minute, merged by
every tick of it) and the capped counts of routines by state; and the end of a tick,
``record_tick`` (the heartbeat and the tick's minute under one lock)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from alma_schedule.model import Routine, TickEndAsk, TickEndParts, TickMinute
from alma_schedule.model.tick import TICK_LOG_KEEP_DAYS, TICK_LOG_PRUNE_LIMIT
from alma_schedule.stores.backfill_args import log_tick_args, tick_end_args
from alma_schedule.stores.validation import check_limit


def _larger(stored: float | None, given: float | None) -> float | None:
    if stored is None:
        return given
    return stored if given is None else max(stored, given)


class TickLogMixin:
    _lock: threading.RLock
    _routines: dict[tuple[str, str, str], Routine]
    _tick_log: dict[datetime, TickMinute]

    def log_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> None:
        now, claimed, lag_p50, lag_p95 = log_tick_args(now, claimed, lag_p50, lag_p95)
        minute = now.replace(second=0, microsecond=0)
        with self._lock:
            old = self._tick_log.get(minute)
            if old is None:
                self._tick_log[minute] = TickMinute(minute, 1, claimed, lag_p50, lag_p95)
            else:
                self._tick_log[minute] = TickMinute(
                    minute,
                    old.ticks + 1,
                    old.claimed + claimed,
                    _larger(old.lag_p50, lag_p50),
                    _larger(old.lag_p95, lag_p95),
                )
            oldest = minute - timedelta(days=TICK_LOG_KEEP_DAYS)
            for gone in sorted(m for m in self._tick_log if m < oldest)[:TICK_LOG_PRUNE_LIMIT]:
                del self._tick_log[gone]

    def record_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> datetime | None:
        now, claimed, lag_p50, lag_p95 = log_tick_args(now, claimed, lag_p50, lag_p95)
        with self._lock:  # one step, as the SQL store's one statement
            hint = self.heartbeat(now)
            self.log_tick(now, claimed, lag_p50, lag_p95)
            return hint

    def begin_tick_end(self, ask: TickEndAsk) -> AbstractContextManager[Callable[[], TickEndParts]]:
        """Nothing starts early here: every part is asked after the caller's sends, as before (the
        arguments are checked as the SQL store checks them)."""
        tick_end_args(ask)
        return nullcontext(TickEndParts)

    if TYPE_CHECKING:

        def heartbeat(self, now: datetime) -> datetime | None: ...

    def count_routines(self, cap: int = 10_000) -> dict[str, int]:
        cap = check_limit("cap", cap)
        counts = {"enabled": 0, "paused": 0, "disabled": 0}
        with self._lock:
            for r in self._routines.values():
                if r.deleted_at is None:
                    state = "disabled" if not r.enabled else "paused" if r.paused_reason is not None else "enabled"
                    counts[state] += 1
        return {k: min(n, cap + 1) for k, n in counts.items()}

    def tick_log(self, limit: int = 60) -> list[TickMinute]:
        limit = check_limit("limit", limit)
        with self._lock:
            return [self._tick_log[m] for m in sorted(self._tick_log, reverse=True)[:limit]]
