"""Backfills of :class:`~alma_schedule.stores.sql.SqlStore`: the range rows (tenant), the tick's
backfill claim and the system-wide routine listing (system).
docs/architecture.md, section "The modules, in detail" (stores/sql/store_backfills.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from typing import Any

from alma_schedule.errors import BackfillRefused, NotFound
from alma_schedule.model import BACKFILL_ORIGIN, Backfill, BackfillStep, Routine, RunRecord, RunState, Scope
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
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import new_run, routine_from_row, run_from_row, run_from_values
from alma_schedule.stores.sql.schema import routines
from alma_schedule.stores.sql.store_base import SqlBase
from alma_schedule.stores.sql.store_events import append
from alma_schedule.stores.validation import check_routine_key, require_utc

_N_ROUTINE = len(routines.c)


def _backfill(row: Any) -> Backfill:
    return Backfill(*row)


class BackfillsMixin(SqlBase):
    # ------------------------------------------------------------------ backfills (tenant)

    def put_backfill(self, backfill: Backfill, *, now: datetime, actor: str | None = None) -> Backfill:
        """Tenant, ONE transaction: lock the routine row, check it and its current range, write (and
        the ``backfill`` event)."""
        key, row, now = backfill_args(backfill, now)
        actor = audit.check_actor(actor)
        with self._tx() as conn:
            found = conn.execute(q.select_routine(*key, lock=True)).first()
            routine = routine_from_row(found) if found is not None else None
            if routine is None or routine.deleted_at is not None:
                raise NotFound.of("routine", "/".join(key))
            inactive = routine.inactive_reason
            if inactive is not None:
                raise BackfillRefused(f"routine {routine.key} is {inactive}", reason=inactive)
            old_row = conn.execute(q.select_backfill(*key)).first()
            old = _backfill(old_row) if old_row is not None else None
            if old is not None and old.pending:
                raise BackfillRefused(
                    f"routine {routine.key} has a pending backfill {old.from_at.isoformat()}.."
                    f"{old.to_at.isoformat()}; cancel it first",
                    reason="pending",
                )
            values = {f.name: getattr(row, f.name) for f in fields(row)}
            stored = _backfill(conn.execute(q.put_backfill(self.dialect, values)).one())
            append(conn, key, audit.backfilled(now, actor, row.from_at, row.to_at, row.max_fires))
            return stored

    def get_backfill(self, scope: Scope, routine_id: str) -> Backfill | None:
        key = check_routine_key(scope, routine_id)
        with self._tx(read=True) as conn:
            row = conn.execute(q.select_backfill(*key)).first()
        return _backfill(row) if row is not None else None

    def cancel_backfill(
        self, scope: Scope, routine_id: str, *, now: datetime, actor: str | None = None
    ) -> tuple[Backfill | None, RunRecord | None]:
        """Tenant, ONE transaction: the range cancelled, its claimed run ``skipped(operator)`` (and a
        ``cancel_backfill`` event when a pending range was cancelled)."""
        key = check_routine_key(scope, routine_id)
        now = require_utc("now", now)
        actor = audit.check_actor(actor)
        with self._tx() as conn:
            conn.execute(q.select_routine(*key, lock=True)).first()
            before = conn.execute(q.select_backfill(*key)).first()
            conn.execute(q.cancel_backfill(*key, now))
            row = conn.execute(q.select_backfill(*key)).first()
            if row is None:
                return None, None
            if before is not None and _backfill(before).pending:
                append(conn, key, audit.cancelled_backfill(now, actor))
            gone = conn.execute(q.skip_claimed_backfill_run(*key, now)).first()
            return _backfill(row), (run_from_row(gone) if gone is not None else None)

    # ------------------------------------------------------------------ the tick's backfill claim (system)

    def claim_backfills(
        self,
        now: datetime,
        limit: int,
        plan: Callable[[Routine, Backfill], BackfillStep | None],
        timers: Timers,
    ) -> list[RunRecord]:
        """System, ONE transaction of its own (see the module docstring)."""
        now, limit = claim_backfills_args(now, limit, plan, timers)
        d = self.dialect
        with self._tx(read=True) as conn:  # autocommit on PostgreSQL, no write lock on SQLite
            if conn.execute(q.any_pending_backfill()).first() is None:
                return []
        with self._tx() as conn:
            ready = conn.execute(q.claimable_backfills(now, limit)).all()
            if not ready:
                return []
            steps: list[tuple[Routine, Backfill, BackfillStep]] = []
            for row in ready:
                routine, backfill = routine_from_row(row), _backfill(row[_N_ROUTINE:])
                try:
                    step = plan(routine, backfill)
                    if step is not None:
                        steps.append((routine, backfill, step_args(step)))
                except Exception:
                    continue  # the planner reports its own errors; this routine waits for a later tick
            keys4 = [(r.org, r.uid, r.routine_id, run_id) for r, _, s in steps for run_id, _ in s.candidates]
            existing: dict[tuple[str, str, str], set[str]] = {}
            for chunk in self._driver.chunks(keys4):
                stmt, params = self._driver.existing_runs(chunk)
                for org, uid, rid, run_id in conn.execute(stmt, params).all():
                    existing.setdefault((org, uid, rid), set()).add(run_id)
            new_rows: list[dict[str, Any]] = []
            moves: list[dict[str, Any]] = []
            for r, _, step in steps:
                rk = (r.org, r.uid, r.routine_id)
                chosen = policy.pick(step, existing.get(rk, set()))
                if chosen is not None:
                    run_id, fire_at = step.candidates[chosen]
                    new_rows.append(
                        new_run(
                            rk,
                            run_id,
                            state=RunState.CLAIMED,
                            origin=BACKFILL_ORIGIN,
                            config_revision=r.config_revision,
                            fire_at=fire_at,
                            now=now,
                            expires_at=step.expires_at,
                            resend_at=step.resend_at,
                            due_at=now,  # due when claimed: its lag is from the claim, not the past fire
                        )
                    )
                nxt = policy.next_at(step, chosen)
                moves.append({"org": r.org, "uid": r.uid, "routine_id": r.routine_id, "next_at": nxt})
            claimed: list[RunRecord] = []
            if new_rows:
                by_key = {(v["org"], v["uid"], v["routine_id"], v["run_id"]): v for v in new_rows}
                claimed = [run_from_values(by_key[tuple(k)]) for k in conn.execute(*q.insert_runs(d, new_rows)).all()]
                taken = {(c.org, c.uid, c.routine_id) for c in claimed}
                lost = {k[:3] for k in by_key} - taken  # cannot happen under the routine lock: keep the range
                moves = [m for m in moves if (m["org"], m["uid"], m["routine_id"]) not in lost]
            if moves:
                conn.execute(*q.move_backfills(moves))
        return sorted(claimed, key=lambda c: (c.fire_at, c.org, c.uid, c.routine_id))

    # ------------------------------------------------------------------ routines of every scope (system)

    def system_routines(
        self,
        *,
        kind: str | None = None,
        state: str | None = None,
        limit: int = 1000,
        after: tuple[str, str, str] | None = None,
    ) -> list[Routine]:
        limit, edge = system_routines_args(kind, state, limit, after)
        with self._tx(read=True) as conn:
            rows = conn.execute(q.system_routines(kind, state, limit, edge)).all()
        return [routine_from_row(r) for r in rows]

    def system_routine_counts(self, *, kind: str | None = None, state: str | None = None) -> list[tuple[str, str, int]]:
        listing_args(kind, state)
        with self._tx(read=True) as conn:
            return [(org, uid, int(n)) for org, uid, n in conn.execute(q.system_routine_counts(kind, state)).all()]
