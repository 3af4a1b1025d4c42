"""The run half of :class:`~alma_schedule.stores.memory.MemoryStore`: transitions, money and reads.
docs/architecture.md, section "The modules, in detail" (stores/memory/runs.py).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from alma_schedule.errors import NotFound, StoreConflict
from alma_schedule.model import (
    EDGES,
    NON_TERMINAL,
    Ceiling,
    ClaimResult,
    Reason,
    Resends,
    ReserveResult,
    Routine,
    RunKey,
    RunRecord,
    RunResult,
    RunState,
    Scope,
)
from alma_schedule.policies import audit, backoff, overlap, settlement, streak, supersession
from alma_schedule.policies.fixed_delay import rearmed_due
from alma_schedule.settings import Timers
from alma_schedule.stores.arguments import (
    annotate_args,
    check_run_key,
    check_timers,
    finish_args,
    mark_blocked_args,
    reserve_args,
    spend_args,
    start_args,
    submit_args,
)
from alma_schedule.stores.memory.buffered import BufferedMixin
from alma_schedule.stores.memory.events import EventsMixin
from alma_schedule.stores.validation import check_limit, require_utc

RKey = tuple[str, str, str]


def _check_key(key: RunKey) -> tuple[RKey, str]:
    return check_run_key(key), key.run_id


def _order(rec: RunRecord) -> tuple[datetime, str, str, str, str]:
    return (rec.fire_at, rec.run_id, rec.org, rec.uid, rec.routine_id)


class RunsMixin(BufferedMixin, EventsMixin):
    _lock: threading.RLock
    _routines: dict[RKey, Routine]
    _runs: dict[RKey, dict[str, RunRecord]]
    _active: dict[RKey, str]
    _spend: dict[tuple[str, str], int]

    def _write(self, row: Routine) -> None:  # provided by MemoryStore
        raise NotImplementedError

    # ------------------------------------------------------------------ internals

    def _put_run(self, rec: RunRecord) -> None:
        """Store a run, keeping the one-non-terminal-run-per-routine index (the partial unique index)."""
        rk = (rec.org, rec.uid, rec.routine_id)
        active = self._active.get(rk)
        if rec.state in NON_TERMINAL:
            if active is not None and active != rec.run_id:
                raise StoreConflict(f"routine {rk} already has the non-terminal run {active}")
            self._active[rk] = rec.run_id
        elif active == rec.run_id:
            del self._active[rk]
        self._index_buffered(rk, rec)
        self._runs.setdefault(rk, {})[rec.run_id] = rec

    def _find(self, rk: RKey, run_id: str) -> RunRecord | None:
        return self._runs.get(rk, {}).get(run_id)

    def _nonterminal(self, predicate: Callable[[RunRecord], bool]) -> list[RunRecord]:
        rows = (self._runs[rk][rid] for rk, rid in self._active.items())
        return [r for r in rows if predicate(r)]

    def _all_runs(self, scope: Scope | None = None) -> Iterable[RunRecord]:
        for rk, runs in self._runs.items():
            if scope is None or (rk[0] == scope.org and rk[1] == scope.uid):
                yield from runs.values()

    def _settle(self, rec: RunRecord, cost: int) -> RunRecord:
        """Apply :func:`alma_schedule.policies.settlement.settle`: the reservation moves to ``cost``."""
        money = settlement.settle(rec.reserved_micros, rec.reserve_day, rec.reserve_ceilings, cost)
        if not money.clears:
            return rec
        for move in money.moves:
            slot = (move.ceiling, rec.reserve_day or "")
            self._spend[slot] = self._spend.get(slot, 0) + move.spend_delta
        return dataclasses.replace(rec, **money.run_values())

    def _streak(self, rk: RKey, result: RunResult, now: datetime, timers: Timers) -> None:
        """Apply :func:`alma_schedule.policies.streak.step` to the routine row."""
        row = self._routines.get(rk)
        if row is None:
            return
        s = streak.step(
            row.consecutive_failures,
            row.paused_reason,
            result.outcome,
            result.reason,
            timers.failure_threshold,
            counts_refused=timers.streak_counts_refused,
        )
        if not s.changed:
            return
        row = dataclasses.replace(row, consecutive_failures=s.streak, updated_at=now)
        if s.latch is not None:
            row = dataclasses.replace(row, paused_reason=s.latch, next_due_at=None)
            self._append(rk, audit.auto_paused(now, s.latch))
        self._write(row)

    def _rearm(self, rk: RKey, ended_at: datetime) -> None:
        """A fixed-delay routine's next fire, set by the end of its run in the same step
        (:func:`alma_schedule.policies.fixed_delay.rearmed_due`)."""
        routine = self._out(rk) if rk in self._routines else None
        if routine is None or "after" not in routine.schedule:
            return
        due = rearmed_due(routine, ended_at)
        if due is not None:
            self._write(dataclasses.replace(self._routines[rk], next_due_at=due, updated_at=ended_at))

    def _cas(self, key: RunKey, target: str, now: datetime, **changes: Any) -> ClaimResult:
        rk, run_id = _check_key(key)
        with self._lock:
            rec = self._find(rk, run_id)
            if rec is None:
                return ClaimResult(False, None, "not_found")
            if rec.state not in EDGES[target]:
                return ClaimResult(False, rec, "duplicate")
            new = dataclasses.replace(rec, state=target, state_at=now, **changes)
            self._put_run(new)
            return ClaimResult(True, new, "won")

    # ------------------------------------------------------------------ take-style system writes

    def take_resends(self, now: datetime, limit: int, timers: Timers, *, send: bool = True) -> Resends:
        limit = check_limit("limit", limit)
        check_timers(timers)
        now = require_utc("now", now)
        with self._lock:
            expired = []
            for rec in self._expiring(now, limit):
                gone = dataclasses.replace(
                    rec, state=RunState.SKIPPED, reason=Reason.MISSED, state_at=now, finished_at=now
                )
                self._put_run(gone)
                expired.append(gone)
                if overlap.releases_on_expiry(rec.origin):  # sent below, with the re-sends
                    self._release_buffered((rec.org, rec.uid, rec.routine_id), now, resend_at=now)
            resend = []
            if send:
                for rec in self._resendable(now, limit):
                    n = rec.send_attempts + 1
                    again = dataclasses.replace(
                        rec,
                        send_attempts=n,
                        resend_at=now + Timers.backoff(timers.resend_first, timers.resend_max, n),
                    )
                    self._put_run(again)
                    resend.append(again)
            return Resends(tuple(resend), tuple(expired))

    def _expiring(self, now: datetime, limit: int) -> list[RunRecord]:
        rows = self._nonterminal(lambda r: r.state == RunState.CLAIMED and r.expires_at <= now)
        waiting = (self._runs[rk][rid] for rk, rid in self._buffered.items())
        rows.extend(r for r in waiting if r.expires_at <= now)  # a buffered fire expires alike
        rows.sort(key=lambda r: (r.expires_at, *_order(r)))
        return rows[:limit]

    def _resendable(self, now: datetime, limit: int) -> list[RunRecord]:
        rows = self._nonterminal(
            lambda r: (
                r.state == RunState.CLAIMED and r.expires_at > now and r.resend_at is not None and r.resend_at <= now
            )
        )
        rows.sort(key=lambda r: (r.resend_at, *_order(r)))
        return rows[:limit]

    def _pollable(self, now: datetime, limit: int) -> list[RunRecord]:
        rows = self._nonterminal(
            lambda r: r.state == RunState.SUBMITTED and r.next_poll_at is not None and r.next_poll_at <= now
        )
        rows.sort(key=lambda r: (r.next_poll_at, *_order(r)))
        return rows[:limit]

    def take_polls(self, now: datetime, limit: int, timers: Timers) -> list[RunRecord]:
        limit = check_limit("limit", limit)
        check_timers(timers)
        now = require_utc("now", now)
        with self._lock:
            out = []
            for rec in self._pollable(now, limit):
                n = rec.poll_attempts + 1
                again = dataclasses.replace(
                    rec,
                    poll_attempts=n,
                    next_poll_at=backoff.next_poll(
                        now + Timers.backoff(timers.poll_first, timers.poll_max, n),
                        now,
                        rec.deadline,
                        timers.clock_tolerance,
                    ),
                )
                self._put_run(again)
                out.append(again)
            return out

    # ------------------------------------------------------------------ run transitions

    def _out(self, key: RKey) -> Routine:  # provided by MemoryStore
        raise NotImplementedError

    def _count_start(self, key: RKey, origin: str, now: datetime) -> bool:  # provided by MemoryStore
        raise NotImplementedError

    def start(self, key: RunKey, *, now: datetime, owner: str | None = None, in_window: bool = False) -> ClaimResult:
        rk, now, owner = start_args(key, now, owner, in_window)
        run_id = key.run_id
        with self._lock:
            rec = self._find(rk, run_id)
            if rec is None:
                return ClaimResult(False, None, "not_found")
            if rec.state != RunState.CLAIMED:
                return ClaimResult(False, rec, supersession.lost_start_reason(rec.state, rec.reason))
            if in_window and now >= rec.expires_at:  # its window closed: never started late (the sweep skips it)
                return ClaimResult(False, rec, "expired")
            row = self._routines.get(rk)
            inactive = "deleted" if row is None else row.inactive_reason
            if inactive is None and not self._count_start(rk, rec.origin, now):  # max_runs: counted here
                inactive = Reason.FINISHED
            if inactive is not None:
                new = dataclasses.replace(rec, state=RunState.SKIPPED, reason=inactive, state_at=now, finished_at=now)
                self._put_run(new)
                return ClaimResult(False, new, inactive, self._release_buffered(rk, now))
            new = dataclasses.replace(rec, state=RunState.RUNNING, started_at=now, state_at=now, owner=owner)
            self._put_run(new)
            return ClaimResult(True, new, "won", routine=self._out(rk))

    def submit(
        self,
        key: RunKey,
        *,
        now: datetime,
        batch_id: str | None,
        deadline: datetime,
        next_poll_at: datetime,
        target_task_id: str | None = None,
    ) -> ClaimResult:
        now, values = submit_args(key, now, batch_id, deadline, next_poll_at, target_task_id)
        return self._cas(key, RunState.SUBMITTED, now, **values)

    def begin_collecting(self, key: RunKey, *, now: datetime, owner: str | None = None) -> ClaimResult:
        _, now, owner = start_args(key, now, owner)
        if owner is None:
            return self._cas(key, RunState.COLLECTING, now)
        return self._cas(key, RunState.COLLECTING, now, owner=owner)

    def annotate(self, key: RunKey, values: Mapping[str, Any]) -> RunRecord:
        rk, clean = annotate_args(key, values)
        run_id = key.run_id
        with self._lock:
            rec = self._find(rk, run_id)
            if rec is None:
                raise NotFound.of("run", key)
            if rec.terminal:
                return rec
            new = dataclasses.replace(rec, **clean)
            self._put_run(new)
            return new

    def finish(
        self,
        key: RunKey,
        result: RunResult,
        *,
        now: datetime,
        timers: Timers,
        from_states: Collection[str] | None = None,
    ) -> ClaimResult:
        args = finish_args(key, result, now, from_states)
        check_timers(timers)
        rk, now = args.rk, args.now
        with self._lock:
            rec = self._find(rk, key.run_id)
            if rec is None:
                return ClaimResult(False, None, "not_found")
            if rec.state not in args.allowed:
                return ClaimResult(False, rec, "duplicate")
            cost = settlement.finish_cost(args.cost, rec.cost_micros)
            erase_at = rec.erase_at
            if rec.result_text is not None and erase_at is None:
                erase_at = now + timers.result_retention
            new = dataclasses.replace(
                rec,
                state=result.outcome,
                reason=result.reason,
                state_at=now,
                finished_at=now,
                cost_micros=cost,
                error_class=args.error_class,
                erase_at=erase_at,
            )
            new = self._settle(new, cost)
            self._put_run(new)
            self._streak(rk, result, now, timers)
            self._rearm(rk, now)
            return ClaimResult(True, new, "won", self._release_buffered(rk, now))

    # --- the blocked marker ---

    def mark_blocked(self, key: RunKey, *, why: str, now: datetime, cost_micros: int | None = None) -> bool:
        rk, now, cost = mark_blocked_args(key, why, now, cost_micros)
        with self._lock:
            rec = self._find(rk, key.run_id)
            if rec is None or rec.state != RunState.RUNNING:
                return False
            new = dataclasses.replace(
                rec,
                blocked_at=rec.blocked_at or now,
                blocked_why=rec.blocked_why or why,
                cost_micros=max(rec.cost_micros, cost),
            )
            self._put_run(new)
            return True

    # --- end the blocked marker ---

    # ------------------------------------------------------------------ money

    def reserve(self, key: RunKey, day: str, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveResult:
        args = reserve_args(key, day, amount_micros, ceilings)
        rk, run_id, amount, keys = args.rk, key.run_id, args.amount, args.keys
        with self._lock:
            rec = self._find(rk, run_id)
            if rec is None:
                raise NotFound.of("run", key)
            if rec.state != RunState.RUNNING or rec.reserve_ceilings:
                return ReserveResult(False, None, rec)
            for c in ceilings:
                if not settlement.fits(self._spend.get((c.key, day), 0), amount, c.limit_micros):
                    return ReserveResult(False, c.key, rec)
            for c in ceilings:
                self._spend[(c.key, day)] = self._spend.get((c.key, day), 0) + amount
            new = dataclasses.replace(rec, reserved_micros=amount, reserve_day=day, reserve_ceilings=tuple(keys))
            self._put_run(new)
            return ReserveResult(True, None, new)

    def release(self, key: RunKey) -> RunRecord | None:
        rk, run_id = _check_key(key)
        with self._lock:
            rec = self._find(rk, run_id)
            if rec is None:
                return None
            new = self._settle(rec, 0)
            if new is not rec:
                self._put_run(new)
            return new

    def spend(self, ceiling_key: str, day: str) -> int:
        ceiling_key, day = spend_args(ceiling_key, day)
        with self._lock:
            return self._spend.get((ceiling_key, day), 0)
