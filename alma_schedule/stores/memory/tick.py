"""The tick half of :class:`~alma_schedule.stores.memory.MemoryStore`: ``claim_due``, ``claim_manual``,
``peek_due``.
docs/architecture.md, section "The modules, in detail" (stores/memory/tick.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from alma_schedule.core.fires import fire_id
from alma_schedule.errors import InvalidInput
from alma_schedule.model import (
    ClaimBatch,
    ClaimResult,
    ClaimScan,
    Defer,
    Deferral,
    Fire,
    NotDue,
    Routine,
    RunKey,
    RunRecord,
    RunState,
    check_id,
)
from alma_schedule.model.tick import merge_kinds
from alma_schedule.policies import audit, backoff, limits, missed, supersession
from alma_schedule.policies.plan import Plan
from alma_schedule.policies.supersession import Placement
from alma_schedule.settings import Timers
from alma_schedule.stores.arguments import claim_due_args, claim_manual_args
from alma_schedule.stores.fast import Staging
from alma_schedule.stores.memory.runs import RKey, RunsMixin
from alma_schedule.stores.validation import check_collided, check_limit, check_missed, check_utc, require_utc


class TickMixin(RunsMixin):
    _bodies: dict[RKey, tuple[str, str]]

    def _out(self, key: RKey) -> Routine:  # provided by MemoryStore
        raise NotImplementedError

    # ------------------------------------------------------------------ the tick (system)

    def _due(self, now: datetime, limit: int) -> list[RKey]:
        due = [
            (row.next_due_at, k)
            for k, row in self._routines.items()
            if row.next_due_at is not None
            and row.next_due_at <= now
            and row.inactive_reason is None
            and not backoff.held_back(row.defer_until, now)
        ]
        due.sort()
        return [k for _, k in due[:limit]]

    def claim_due(
        self,
        now: datetime,
        limit: int,
        decide: Callable[[Routine], Any],
        timers: Timers,
        scan: ClaimScan | None = None,
        staging: Staging | None = None,
    ) -> ClaimBatch:
        """Under the one lock (``scan`` is accepted and not needed: one batch at a time, and a
        batch sorts its due routines in memory; ``staging`` is checked and never called: nothing
        runs meanwhile here)."""
        now, limit = claim_due_args(now, limit, decide, timers, scan, staging)
        claimed: list[RunRecord] = []
        skipped: list[RunRecord] = []
        deferred: list[Deferral] = []
        buffered: list[RunRecord] = []
        kinds: dict[str, int] = {}  # the fires the cursor moves collapsed, by routine kind
        trusted = isinstance(decide, Plan)  # the tick's own plan: its answers are not re-checked
        with self._lock:
            for key in self._due(now, limit):
                row = self._routines[key]
                try:
                    decision = decide(self._out(key))
                    if trusted and isinstance(decision, Fire):
                        fire_at, next_due, collapsed = decision.fire_at, decision.next_due_at, decision.fires_missed
                        collided = decision.collided
                        expires_at, resend_at, due_at = (
                            decision.expires_at,
                            decision.resend_at,
                            decision.due_at or fire_at,
                        )
                    elif trusted and isinstance(decision, NotDue):
                        next_due = decision.next_due_at
                    elif isinstance(decision, Fire):
                        check_id("run_id", decision.run_id)
                        fire_at = require_utc("fire_at", decision.fire_at)
                        expires_at = require_utc("expires_at", decision.expires_at)
                        resend_at = check_utc("resend_at", decision.resend_at, optional=True)
                        next_due = check_utc("next_due_at", decision.next_due_at, optional=True)
                        due_at = check_utc("due_at", decision.due_at, optional=True) or fire_at
                        collapsed = check_missed(decision.fires_missed)
                        collided = check_collided(decision.collided, fire_at)
                    elif isinstance(decision, NotDue):
                        next_due = check_utc("next_due_at", decision.next_due_at, optional=True)
                    elif isinstance(decision, Defer):
                        check_utc("until", decision.until)
                    else:
                        raise InvalidInput(f"decide returned {type(decision).__name__}")
                except Exception as exc:
                    until = backoff.retry_at(now, row.error_count, timers.defer_first, timers.defer_max)
                    decision = Defer(until, repr(exc))
                if isinstance(decision, Defer):
                    until = require_utc("until", decision.until)
                    error = decision.error.replace("\x00", "\\x00")
                    held = backoff.deferred(row.error_count, until, error)
                    self._write(dataclasses.replace(row, **held.fields(), updated_at=now))
                    first = backoff.first_deferral(row.error_count)
                    deferred.append(Deferral(*key, until, error, first=first))
                    continue
                if isinstance(decision, NotDue):
                    self._write(dataclasses.replace(row, next_due_at=next_due, updated_at=now))
                    continue
                if row.last_fire is not None and row.last_fire >= fire_at:
                    continue  # the cursor is already past this fire: nothing to advance, no row
                total, capped = missed.add(row.fires_missed, row.fires_missed_capped, collapsed)
                self._write(
                    dataclasses.replace(
                        row,
                        last_fire=fire_at,
                        next_due_at=next_due,
                        **backoff.CLEAR.fields(),
                        updated_at=now,
                        fires_missed=total,
                        fires_missed_capped=capped,
                    )
                )
                if collapsed:
                    kinds[row.kind] = kinds.get(row.kind, 0) + collapsed
                runs = self._runs.setdefault(key, {})
                skipped.extend(self._collided(key, row.config_revision, collided, now))
                if decision.run_id in runs:
                    continue
                base = RunRecord(
                    *key,
                    decision.run_id,
                    RunState.CLAIMED,
                    "schedule",
                    row.config_revision,
                    fire_at,
                    now,
                    now,
                    expires_at,
                    due_at=due_at,
                )
                active = self._active.get(key)
                blocker = runs[active] if active is not None else None
                placement = supersession.place(
                    decision.missed,
                    None if blocker is None else blocker.state,
                    None if blocker is None else blocker.origin,
                    buffer=decision.buffer,
                )
                if decision.buffer and not decision.missed:  # overlap latest: the newer fire replaces it
                    replaced = self._replace_buffered(key, now)
                    if replaced is not None:
                        skipped.append(replaced)
                if placement == Placement.SUPERSEDE and blocker is not None:
                    state, reason = supersession.SUPERSEDED
                    gone = dataclasses.replace(blocker, state=state, reason=reason, state_at=now, finished_at=now)
                    self._put_run(gone)
                    skipped.append(gone)
                if placement in (Placement.CLAIM, Placement.SUPERSEDE):
                    rec = dataclasses.replace(base, resend_at=resend_at or now + timers.resend_first)
                    claimed.append(rec)
                    if decision.max_runs is not None:
                        self._count_claim(key)
                elif placement == Placement.BUFFER:  # resend_at: the delay its release keeps
                    due = resend_at or now + timers.resend_first
                    rec = dataclasses.replace(base, state=RunState.BUFFERED, resend_at=due)
                    buffered.append(rec)
                else:
                    state, reason = supersession.MISSED if placement == Placement.MISSED else supersession.OVERLAP
                    rec = dataclasses.replace(base, state=state, reason=reason, finished_at=now)
                    skipped.append(rec)
                self._put_run(rec)
        missed_kinds = merge_kinds(kinds)
        return ClaimBatch(tuple(claimed), tuple(skipped), tuple(deferred), tuple(buffered), missed_kinds)

    def _collided(self, key: RKey, revision: str, collided: tuple[datetime, ...], now: datetime) -> list[RunRecord]:
        """The ``skipped(calendar)`` rows of a claim's collided fires, each under its own instant's
        run id; one whose run id already has a row is left as it is."""
        runs = self._runs.setdefault(key, {})
        made: list[RunRecord] = []
        state, reason = supersession.CALENDAR
        for instant in collided:
            run_id = fire_id(instant)
            if run_id in runs:
                continue
            rec = RunRecord(*key, run_id, state, "schedule", revision, instant, now, now, instant, due_at=instant)
            rec = dataclasses.replace(rec, reason=reason, finished_at=now)
            self._put_run(rec)
            made.append(rec)
        return made

    def _count_claim(self, key: RKey) -> None:
        """One more claimed schedule fire of a limited routine (information only: ``max_runs``
        counts starts, :func:`alma_schedule.policies.limits.count_start`)."""
        row = self._routines[key]
        self._write(dataclasses.replace(row, schedule_claims=limits.count_claim(row.schedule_claims)))

    def claim_manual(
        self,
        key: RunKey,
        *,
        now: datetime,
        expires_at: datetime,
        resend_at: datetime,
        actor: str | None = None,
    ) -> ClaimResult:
        args = claim_manual_args(key, now, expires_at, resend_at)
        actor = audit.check_actor(actor)
        rk, run_id, now, expires, resend = args.key, args.run_id, args.now, args.expires_at, args.resend_at
        with self._lock:
            row = self._routines.get(rk)
            if row is None:
                return ClaimResult(False, None, "not_found")
            inactive = row.inactive_reason
            if inactive is not None:
                return ClaimResult(False, None, inactive)
            runs = self._runs.setdefault(rk, {})
            active = self._active.get(rk)
            if active is not None:
                return ClaimResult(False, runs[active], "overlap")
            if run_id in runs:
                return ClaimResult(False, runs[run_id], "duplicate")
            rec = RunRecord(
                *rk,
                run_id,
                RunState.CLAIMED,
                "manual",
                row.config_revision,
                now,
                now,
                now,
                expires,
                resend_at=resend,
                due_at=now,
            )
            self._put_run(rec)
            self._append(rk, audit.entry("trigger", now, actor, row, row, reason=run_id, always=True))
            return ClaimResult(True, rec, "won")

    def peek_due(self, now: datetime, limit: int) -> list[Routine]:
        limit = check_limit("limit", limit)
        now = require_utc("now", now)
        with self._lock:
            return [self._out(k) for k in self._due(now, limit)]
