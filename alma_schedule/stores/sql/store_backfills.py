"""Backfills of :class:`~alma_schedule.stores.sql.SqlStore`: the range rows (tenant), the tick's
backfill claim and the system-wide routine listing (system).

``claim_backfills`` is ONE transaction of its own, after the tick's ``claim_due`` batches. With no
pending backfill it costs one read and nothing else: an autocommit (SQLite: a read transaction)
``SELECT ... LIMIT 1`` through the partial index ``ix_backfills_pending``, returning nothing.
Otherwise, in one write transaction:

1. lock (skip-locked) the routines with a pending backfill that are live, enabled, unpaused, not
   due and have no non-terminal run (read through ``ix_backfills_pending``);
2. ask ``plan`` for each (in Python: the cron math stays in the core);
3. one SELECT of the candidates whose run key exists;
4. one INSERT of the chosen fires (``claimed``, origin ``backfill``; ``ON CONFLICT DO NOTHING``);
5. one executemany moving each range's ``next_at``
   (:mod:`alma_schedule.policies.backfill` decides both the fire and the move).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from typing import Any

from alma_schedule.errors import BackfillRefused, NotFound
from alma_schedule.model import BACKFILL_ORIGIN, Backfill, BackfillStep, Routine, RunRecord, RunState, Scope
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
from alma_schedule.stores.sql.store_tick import TickMixin
from alma_schedule.stores.validation import check_routine_key, require_utc

_N_ROUTINE = len(routines.c)


def _backfill(row: Any) -> Backfill:
    return Backfill(*row)


class BackfillsMixin(TickMixin):  # TickMixin: its row chunking for SQLite's bind limit
    # ------------------------------------------------------------------ backfills (tenant)

    def put_backfill(self, backfill: Backfill, *, now: datetime) -> Backfill:
        """Tenant, ONE transaction: lock the routine row, check it and its current range, write."""
        key, row, now = backfill_args(backfill, now)
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
            return _backfill(conn.execute(q.put_backfill(self.dialect, values)).one())

    def get_backfill(self, scope: Scope, routine_id: str) -> Backfill | None:
        key = check_routine_key(scope, routine_id)
        with self._tx(read=True) as conn:
            row = conn.execute(q.select_backfill(*key)).first()
        return _backfill(row) if row is not None else None

    def cancel_backfill(
        self, scope: Scope, routine_id: str, *, now: datetime
    ) -> tuple[Backfill | None, RunRecord | None]:
        """Tenant, ONE transaction: the range cancelled, its claimed run ``skipped(operator)``."""
        key = check_routine_key(scope, routine_id)
        now = require_utc("now", now)
        with self._tx() as conn:
            conn.execute(q.select_routine(*key, lock=True)).first()
            conn.execute(q.cancel_backfill(*key, now))
            row = conn.execute(q.select_backfill(*key)).first()
            if row is None:
                return None, None
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
            for chunk in self._chunks(keys4):
                stmt, params = q.existing_runs(d, chunk)
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
