"""The read and maintenance half of the memory store's runs: the ledger, peeks, operator views,
pruning and erasure. Every method holds the one lock for its whole scan (a consistent snapshot).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime, timedelta

from alma_schedule.model import (
    Reason,
    Resends,
    RunKey,
    RunRecord,
    RunState,
    Scope,
    check_scope,
)
from alma_schedule.policies import backfill
from alma_schedule.policies.ownership import owned_by
from alma_schedule.stores.arguments import age_args, list_runs_args, run_ref_args, running_of_args
from alma_schedule.stores.memory.runs import RunsMixin, _order
from alma_schedule.stores.validation import check_limit, check_routine_key, require_utc


class ReadsMixin(RunsMixin):
    # ------------------------------------------------------------------ reads

    def get(self, key: RunKey) -> RunRecord | None:
        rk = run_ref_args(key)
        with self._lock:
            return self._find(rk, key.run_id)

    def list_runs(
        self,
        scope: Scope,
        *,
        routine_id: str | None = None,
        state: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        before: tuple[datetime, str] | tuple[datetime, str, str] | None = None,
    ) -> list[RunRecord]:
        since, edge, limit = list_runs_args(scope, routine_id, state, since, before, limit)
        width = 0 if edge is None else len(edge)  # the ledger key (fire_at, run_id, routine_id), or its pair
        with self._lock:
            rows = [
                r
                for r in self._all_runs(scope)
                if (routine_id is None or r.routine_id == routine_id)
                and (state is None or r.state == state)
                and (since is None or r.fire_at >= since)
                and (edge is None or (r.fire_at, r.run_id, r.routine_id)[:width] < edge)
            ]
        rows.sort(key=lambda r: (r.fire_at, r.run_id, r.routine_id), reverse=True)
        return rows[:limit]

    def last_completed_delivery(self, scope: Scope, routine_id: str) -> RunRecord | None:
        rk = check_routine_key(scope, routine_id)
        with self._lock:
            rows = [
                r
                for r in self._runs.get(rk, {}).values()
                if r.state == RunState.COMPLETED and r.reason == Reason.DELIVERED and r.delivery_hash is not None
            ]
        return max(rows, key=_order, default=None)

    def peek_resends(self, now: datetime, limit: int) -> Resends:
        limit = check_limit("limit", limit)
        now = require_utc("now", now)
        with self._lock:
            return Resends(tuple(self._resendable(now, limit)), tuple(self._expiring(now, limit)))

    def peek_polls(self, now: datetime, limit: int) -> list[RunRecord]:
        limit = check_limit("limit", limit)
        now = require_utc("now", now)
        with self._lock:
            return self._pollable(now, limit)

    def blocked(self, now: datetime, run_time_limit: timedelta, limit: int = 100) -> list[RunRecord]:
        now, cutoff, limit = age_args("run_time_limit", now, run_time_limit, limit, times=2)
        with self._lock:
            rows = self._nonterminal(
                lambda r: (
                    (r.state == RunState.RUNNING and r.blocked_at is not None)
                    or (r.state in (RunState.RUNNING, RunState.COLLECTING) and r.state_at < cutoff)
                    or (r.state == RunState.SUBMITTED and r.deadline is not None and now > r.deadline)
                )
            )
        rows.sort(key=lambda r: (r.state_at, *_order(r)))
        return rows[:limit]

    def stuck(self, now: datetime, older_than: timedelta, limit: int = 100) -> list[RunRecord]:
        _, cutoff, limit = age_args("older_than", now, older_than, limit)
        with self._lock:
            rows = self._nonterminal(lambda r: r.state != RunState.CLAIMED and r.state_at < cutoff)
        rows.sort(key=lambda r: (r.state_at, *_order(r)))
        return rows[:limit]

    def unstarted(self, now: datetime, older_than: timedelta, limit: int = 1) -> list[RunRecord]:
        _, cutoff, limit = age_args("older_than", now, older_than, limit)
        with self._lock:
            rows = self._nonterminal(
                lambda r: r.state == RunState.CLAIMED and r.state_at < cutoff and (r.due_at or r.fire_at) < cutoff
            )
        rows.sort(key=lambda r: (r.state_at, *_order(r)))
        return rows[:limit]

    # --- the owner of a run ---

    def running_of(self, owner: str, limit: int = 1000) -> list[RunRecord]:
        owner, limit = running_of_args(owner, limit)
        with self._lock:
            rows = self._nonterminal(lambda r: r.state == RunState.RUNNING and owned_by(r.owner, owner))
        rows.sort(key=lambda r: (r.org, r.uid, r.routine_id, r.run_id))
        return rows[:limit]

    # --- end the owner of a run ---

    # ------------------------------------------------------------------ maintenance

    def prune(self, before: datetime) -> int:
        before = require_utc("before", before)
        with self._lock:
            doomed = [
                r for r in self._all_runs() if r.terminal and r.finished_at is not None and r.finished_at < before
            ]
            fires: dict[tuple[str, str, str], list[datetime]] = {}
            for r in doomed:
                del self._runs[(r.org, r.uid, r.routine_id)][r.run_id]
                if r.origin in backfill.FIRE_ORIGINS:
                    fires.setdefault((r.org, r.uid, r.routine_id), []).append(r.fire_at)
            for rk, instants in fires.items():  # the same step: pruned_through rises with the delete
                row = self._routines.get(rk)
                if row is not None:
                    raised = backfill.raised_pruned_through(row.pruned_through, instants)
                    self._write(dataclasses.replace(row, pruned_through=raised))
            return len(doomed)

    def _erase(self, rows: Iterable[RunRecord]) -> int:
        count = 0
        for r in list(rows):
            self._put_run(dataclasses.replace(r, result_text=None, erase_at=None))
            count += 1
        return count

    def erase_results(self, scope: Scope) -> int:
        check_scope(scope)
        with self._lock:
            self._erase_events(scope)
            return self._erase(r for r in self._all_runs(scope) if r.result_text is not None)

    def _erasable(self, now: datetime) -> list[RunRecord]:
        """The runs whose ``erase_at`` has passed (what ``erase_expired_results`` takes; the probe's
        ``expired_results``). Under the store's lock."""
        return [r for r in self._all_runs() if r.erase_at is not None and r.erase_at <= now]

    def erase_expired_results(self, now: datetime, limit: int = 1000) -> int:
        limit = check_limit("limit", limit)
        now = require_utc("now", now)
        with self._lock:
            rows = self._erasable(now)
            rows.sort(key=lambda r: (r.erase_at, *_order(r)))
            return self._erase(rows[:limit])
