"""The tick's sweeps of :class:`~alma_schedule.stores.sql.SqlStore`: ``take_resends`` (expiries
and re-sends), ``take_polls`` and the read-only peeks (statements in :mod:`.queries.tick`)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.model import Resends, Routine, RunKey, RunRecord, RunState
from alma_schedule.policies import backoff, overlap
from alma_schedule.settings import Timers
from alma_schedule.stores.arguments import check_timers
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import routine_from_row, run_from_row
from alma_schedule.stores.sql.schema import runs
from alma_schedule.stores.sql.store_base import SqlBase
from alma_schedule.stores.sql.store_buffered import release_buffered
from alma_schedule.stores.validation import check_limit, require_utc


def _pushes(now: datetime, first: timedelta, cap: timedelta) -> tuple[list[datetime], datetime]:
    """``now + backoff(first, cap, attempts + 1)`` for each attempt count below the cap, and the cap."""
    pushes: list[datetime] = []
    for attempts in range(31):
        delay = Timers.backoff(first, cap, attempts + 1)
        if delay >= cap:
            break
        pushes.append(now + delay)
    return pushes, now + cap


def _by_fire(rec: RunRecord) -> tuple[Any, ...]:
    return (rec.fire_at, rec.run_id, rec.org, rec.uid, rec.routine_id)


class SweepsMixin(SqlBase):
    def take_resends(self, now: datetime, limit: int, timers: Timers, *, send: bool = True) -> Resends:
        """System, ONE transaction: expire, then (if ``send``) take and push back, skip-locked."""
        limit = check_limit("limit", limit)
        check_timers(timers)
        now = require_utc("now", now)
        n = limit
        with self._tx() as conn:
            expired = sorted(
                (run_from_row(r) for r in conn.execute(q.expire_claimed(now, n, self.dialect)).all()),
                key=lambda r: (r.expires_at, *_by_fire(r)),
            )
            for gone in expired:  # a blocking (manual) run expired: release the fire buffered behind it
                if overlap.releases_on_expiry(gone.origin):  # resend_at now: the take below sends it
                    release_buffered(conn, (gone.org, gone.uid, gone.routine_id), now, resend_at=now)
            resend: list[RunRecord] = []
            if send:
                pushes, cap = _pushes(now, timers.resend_first, timers.resend_max)
                taken = conn.execute(q.take_resends(now, n, pushes, cap, self.dialect)).all()
                resend = sorted((run_from_row(r) for r in taken), key=_by_fire)
        return Resends(tuple(resend), tuple(expired))

    def take_polls(self, now: datetime, limit: int, timers: Timers) -> list[RunRecord]:
        """System, ONE statement: take due polls and push ``next_poll_at`` back, skip-locked."""
        limit = check_limit("limit", limit)
        check_timers(timers)
        now = require_utc("now", now)
        pushes, cap = _pushes(now, timers.poll_first, timers.poll_max)
        with self._tx() as conn:
            taken = [run_from_row(r) for r in conn.execute(q.take_polls(now, limit, pushes, cap, self.dialect)).all()]
            # a deadline before the pushed poll: poll at deadline + tolerance (one more statement,
            # only when such a row was taken)
            early: dict[RunKey, datetime] = {}
            for r in taken:
                at = (
                    None
                    if r.next_poll_at is None
                    else backoff.next_poll(r.next_poll_at, now, r.deadline, timers.clock_tolerance)
                )
                if at is not None and at != r.next_poll_at:
                    early[r.key] = at
            if early:
                conn.execute(*q.set_next_polls(early))
                taken = [dataclasses.replace(r, next_poll_at=early.get(r.key, r.next_poll_at)) for r in taken]
            return sorted(taken, key=_by_fire)

    def peek_due(self, now: datetime, limit: int) -> list[Routine]:
        limit = check_limit("limit", limit)
        now = require_utc("now", now)
        with self._tx(read=True) as conn:
            return [routine_from_row(r) for r in conn.execute(*q.select_due(now, limit, lock=False)).all()]

    def peek_resends(self, now: datetime, limit: int) -> Resends:
        limit = check_limit("limit", limit)
        now = require_utc("now", now)
        n = limit
        with self._tx(read=True) as conn:
            due = q.peek_runs(runs.c.resend_at, RunState.CLAIMED, now, n, live=True)
            resend = [run_from_row(r) for r in conn.execute(due).all()]
            past = q.peek_expiring(now, n)
            expired = [run_from_row(r) for r in conn.execute(past).all()]
        return Resends(tuple(resend), tuple(expired))

    def peek_polls(self, now: datetime, limit: int) -> list[RunRecord]:
        limit = check_limit("limit", limit)
        now = require_utc("now", now)
        with self._tx(read=True) as conn:
            return [
                run_from_row(r)
                for r in conn.execute(q.peek_runs(runs.c.next_poll_at, RunState.SUBMITTED, now, limit)).all()
            ]
