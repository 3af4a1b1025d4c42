"""The backfill half of :class:`~alma_schedule.stores.memory.MemoryStore`: the ``backfills`` rows,
the tick's backfill claim, and the system-wide routine listing (``routines list --all``).
docs/architecture.md, section "The modules, in detail" (stores/memory/backfills.py).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import datetime
from typing import Any

from alma_schedule.errors import BackfillRefused, NotFound
from alma_schedule.model import BACKFILL_ORIGIN, Backfill, Reason, Routine, RunRecord, RunState, Scope
from alma_schedule.policies import audit
from alma_schedule.policies import backfill as policy
from alma_schedule.settings import Timers
from alma_schedule.stores.backfill_args import (
    backfill_args,
    claim_backfills_args,
    listing_args,
    step_args,
    system_routines_args,
)
from alma_schedule.stores.memory.runs import RKey, RunsMixin
from alma_schedule.stores.validation import check_routine_key, require_utc


class BackfillsMixin(RunsMixin):
    _backfills: dict[RKey, Backfill]

    def _out(self, key: RKey) -> Routine:  # provided by MemoryStore
        raise NotImplementedError

    # ------------------------------------------------------------------ backfills (tenant)

    def put_backfill(self, backfill: Backfill, *, now: datetime, actor: str | None = None) -> Backfill:
        key, row, now = backfill_args(backfill, now)
        actor = audit.check_actor(actor)
        with self._lock:
            routine = self._routines.get(key)
            if routine is None or routine.deleted_at is not None:
                raise NotFound.of("routine", "/".join(key))
            inactive = routine.inactive_reason
            if inactive is not None:
                raise BackfillRefused(f"routine {routine.key} is {inactive}", reason=inactive)
            old = self._backfills.get(key)
            if old is not None and old.pending:
                raise BackfillRefused(
                    f"routine {routine.key} has a pending backfill {old.from_at.isoformat()}.."
                    f"{old.to_at.isoformat()}; cancel it first",
                    reason="pending",
                )
            self._backfills[key] = row
            self._append(key, audit.backfilled(now, actor, row.from_at, row.to_at, row.max_fires))
            return row

    def get_backfill(self, scope: Scope, routine_id: str) -> Backfill | None:
        key = check_routine_key(scope, routine_id)
        with self._lock:
            return self._backfills.get(key)

    def cancel_backfill(
        self, scope: Scope, routine_id: str, *, now: datetime, actor: str | None = None
    ) -> tuple[Backfill | None, RunRecord | None]:
        key = check_routine_key(scope, routine_id)
        now = require_utc("now", now)
        actor = audit.check_actor(actor)
        with self._lock:
            row = self._backfills.get(key)
            if row is None:
                return None, None
            if row.pending:
                self._append(key, audit.cancelled_backfill(now, actor))
            if row.cancelled_at is None:
                row = dataclasses.replace(row, cancelled_at=now)
                self._backfills[key] = row
            active = self._active.get(key)
            open_run = self._runs[key][active] if active is not None else None
            if open_run is None or open_run.origin != BACKFILL_ORIGIN or open_run.state != RunState.CLAIMED:
                return row, None
            gone = dataclasses.replace(
                open_run, state=RunState.SKIPPED, reason=Reason.OPERATOR, state_at=now, finished_at=now
            )
            self._put_run(gone)
            return row, gone

    # ------------------------------------------------------------------ the tick's backfill claim (system)

    def _backfill_ready(self, key: RKey, now: datetime) -> bool:
        routine = self._routines.get(key)
        if routine is None or routine.inactive_reason is not None or key in self._active:
            return False
        return routine.next_due_at is None or routine.next_due_at > now

    def claim_backfills(self, now: datetime, limit: int, plan: Any, timers: Timers) -> list[RunRecord]:
        now, limit = claim_backfills_args(now, limit, plan, timers)
        claimed: list[RunRecord] = []
        with self._lock:
            pending = sorted((b.next_at, k) for k, b in self._backfills.items() if b.pending)
            ready = [k for _, k in pending if self._backfill_ready(k, now)][: max(limit, 0)]
            for key in ready:
                row = self._backfills[key]
                try:
                    step = plan(self._out(key), row)
                    if step is None:
                        continue
                    step = step_args(step)
                except Exception:
                    continue  # the planner reports its own errors; this routine waits for a later tick
                runs = self._runs.setdefault(key, {})
                chosen = policy.pick(step, runs)
                if chosen is not None:
                    run_id, fire_at = step.candidates[chosen]
                    routine = self._routines[key]
                    rec = RunRecord(
                        *key,
                        run_id,
                        RunState.CLAIMED,
                        BACKFILL_ORIGIN,
                        routine.config_revision,
                        fire_at,
                        now,
                        now,
                        step.expires_at,
                        resend_at=step.resend_at,
                        due_at=now,  # due when claimed: its lag is from the claim, not the past fire
                    )
                    self._put_run(rec)
                    claimed.append(rec)
                self._backfills[key] = dataclasses.replace(row, next_at=policy.next_at(step, chosen))
        return claimed

    # ------------------------------------------------------------------ routines of every scope (system)

    def _listed(self, kind: str | None, state: str | None) -> list[RKey]:
        listing_args(kind, state)
        return sorted(
            k
            for k, r in self._routines.items()
            if r.deleted_at is None and (kind is None or r.kind == kind) and (state is None or state in r.state_names)
        )

    def system_routines(
        self,
        *,
        kind: str | None = None,
        state: str | None = None,
        limit: int = 1000,
        after: tuple[str, str, str] | None = None,
    ) -> list[Routine]:
        limit, edge = system_routines_args(kind, state, limit, after)
        with self._lock:
            keys = [k for k in self._listed(kind, state) if edge is None or k > edge]
            return [self._out(k) for k in keys[:limit]]

    def system_routine_counts(self, *, kind: str | None = None, state: str | None = None) -> list[tuple[str, str, int]]:
        with self._lock:
            counts = Counter((k[0], k[1]) for k in self._listed(kind, state))
        return [(org, uid, n) for (org, uid), n in sorted(counts.items())]
