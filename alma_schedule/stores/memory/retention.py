"""The memory store's retention of run history: ``prune_runs``, one bounded batch of the oldest
terminal runs deleted under the one lock, ``pruned_through`` raised in the same step.
docs/architecture.md, section "The modules, in detail" (stores/memory/retention.py).
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime

from alma_schedule.model import Routine, RunRecord
from alma_schedule.policies import backfill
from alma_schedule.stores.validation import check_limit, require_utc

RKey = tuple[str, str, str]

__all__ = ["RetentionMixin"]


def _age(r: RunRecord) -> tuple[datetime, str, str, str, str]:
    """The order of a prune: oldest end first, then the run's key (a total order)."""
    assert r.finished_at is not None
    return (r.finished_at, r.org, r.uid, r.routine_id, r.run_id)


class RetentionMixin:
    _lock: threading.RLock
    _routines: dict[RKey, Routine]
    _runs: dict[RKey, dict[str, RunRecord]]

    def _write(self, row: Routine) -> None:  # provided by MemoryStore
        raise NotImplementedError

    def prune_runs(self, before: datetime, limit: int) -> int:
        before = require_utc("before", before)
        limit = check_limit("limit", limit)
        with self._lock:
            old = [
                r
                for runs in self._runs.values()
                for r in runs.values()
                if r.terminal and r.finished_at is not None and r.finished_at < before
            ]
            doomed = sorted(old, key=_age)[:limit]
            fires: dict[RKey, list[datetime]] = {}
            for r in doomed:
                rk = (r.org, r.uid, r.routine_id)
                del self._runs[rk][r.run_id]
                if r.origin in backfill.FIRE_ORIGINS:
                    fires.setdefault(rk, []).append(r.fire_at)
            for rk, instants in fires.items():  # the same step: pruned_through rises with the delete
                row = self._routines.get(rk)
                if row is not None:
                    raised = backfill.raised_pruned_through(row.pruned_through, instants)
                    self._write(dataclasses.replace(row, pruned_through=raised))
            return len(doomed)
