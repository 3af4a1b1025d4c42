"""The memory store's heartbeat: the last tick, the wake-up hint, and the routines that carry a
planning error (the same answers as the SQL store's one statement each; see ``Store.heartbeat``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime

from alma_schedule.model import BACKFILL_ORIGIN, Backfill, Deferral, Erroring, Routine, RunRecord, RunState
from alma_schedule.policies import backfill as backfill_policy
from alma_schedule.stores.validation import check_limit, require_utc

RKey = tuple[str, str, str]


class WakeMixin:
    _lock: threading.RLock
    _routines: dict[RKey, Routine]
    _runs: dict[RKey, dict[str, RunRecord]]
    _heartbeat: datetime | None
    _next_wake: datetime | None
    _backfills: dict[RKey, Backfill]

    def _last_backfill_end(self, key: RKey, row: Backfill) -> datetime | None:
        """``finished_at`` of the routine's latest backfill run of the range below its ``next_at``."""
        runs = [
            r
            for r in self._runs.get(key, {}).values()
            if r.origin == BACKFILL_ORIGIN and row.next_at is not None and row.from_at <= r.fire_at < row.next_at
        ]
        return max(runs, key=lambda r: r.fire_at).finished_at if runs else None

    def _wake_candidates(self) -> Iterator[datetime | None]:
        for key, pending in self._backfills.items():  # a pending backfill's next claim
            if pending.pending:
                yield backfill_policy.ready_at(pending.created_at, self._last_backfill_end(key, pending))
        for row in self._routines.values():
            yield row.next_due_at
            if row.last_error is not None:
                yield row.defer_until
        for runs in self._runs.values():
            for rec in runs.values():
                if rec.state == RunState.CLAIMED:
                    yield rec.resend_at
                    yield rec.expires_at
                elif rec.state == RunState.SUBMITTED:
                    yield rec.next_poll_at

    def _wake_at(self, now: datetime) -> datetime | None:
        later = [at for at in self._wake_candidates() if at is not None and at > now]
        return min(later, default=None)

    def heartbeat(self, now: datetime) -> datetime | None:
        now = require_utc("now", now)
        with self._lock:
            if self._heartbeat is None or now > self._heartbeat:
                self._heartbeat = now
            self._next_wake = self._wake_at(now)
            return self._next_wake

    def last_tick(self) -> datetime | None:
        with self._lock:
            return self._heartbeat

    def next_wake_at(self) -> datetime | None:
        with self._lock:
            return self._next_wake

    def peek_wake(self, now: datetime) -> datetime | None:
        now = require_utc("now", now)
        with self._lock:
            return self._wake_at(now)

    def erroring(self, limit: int = 20) -> Erroring:
        limit = check_limit("limit", limit)
        with self._lock:
            rows = [r for r in self._routines.values() if r.last_error is not None and r.deleted_at is None]
        rows.sort(key=lambda r: (r.defer_until is None, r.defer_until, r.org, r.uid, r.routine_id))
        found = tuple(
            Deferral(r.org, r.uid, r.routine_id, r.defer_until, r.last_error, first=False)  # type: ignore[arg-type]
            for r in rows[:limit]
        )
        return Erroring(found, len(rows))
