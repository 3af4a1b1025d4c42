"""The operator's ``record`` on :class:`~alma_schedule.stores.memory.MemoryStore`: any non-terminal run
to its recorded outcome, settled at the recorded cost, with its audit event, in one step under the lock.
docs/architecture.md, section "The modules, in detail" (stores/memory/record.py).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from alma_schedule.model import NON_TERMINAL, ClaimResult, RunKey
from alma_schedule.policies import audit, settlement
from alma_schedule.stores.arguments import record_args
from alma_schedule.stores.memory.runs import RunsMixin

__all__ = ["RecordMixin"]


class RecordMixin(RunsMixin):
    def record(
        self,
        key: RunKey,
        outcome: str,
        reason: str,
        *,
        now: datetime,
        cost_micros: int | None = None,
        actor: str | None = None,
    ) -> ClaimResult:
        rk, now, given = record_args(key, outcome, reason, now, cost_micros)
        actor = audit.check_actor(actor)
        with self._lock:
            rec = self._find(rk, key.run_id)
            if rec is None:
                return ClaimResult(False, None, "not_found")
            if rec.terminal:
                return ClaimResult(False, rec, "duplicate")
            cost = settlement.finish_cost(given, rec.cost_micros)  # the recorded cost
            new = dataclasses.replace(
                rec, state=outcome, reason=reason, state_at=now, finished_at=now, cost_micros=cost
            )
            new = self._settle(new, cost)
            self._put_run(new)
            released = self._release_buffered(rk, now) if rec.state in NON_TERMINAL else None
            self._rearm(rk, now)
            self._append(rk, audit.recorded(now, actor, key.run_id, outcome, reason))
            return ClaimResult(True, new, "won", released)
