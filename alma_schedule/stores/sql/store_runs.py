"""Run transitions, money and ledger reads of :class:`~alma_schedule.stores.sql.SqlStore`.
docs/architecture.md, section "The modules, in detail" (stores/sql/store_runs.py).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from alma_schedule.compat.sqlalchemy import row_mapping
from alma_schedule.errors import NotFound, StoreConflict
from alma_schedule.model import (
    EDGES,
    NON_TERMINAL,
    Ceiling,
    ClaimResult,
    Reason,
    ReserveResult,
    RunKey,
    RunRecord,
    RunResult,
    RunState,
    Scope,
)
from alma_schedule.policies import audit, limits, settlement, streak, supersession
from alma_schedule.settings import Timers
from alma_schedule.stores.arguments import (
    annotate_args,
    check_run_key,
    check_timers,
    finish_args,
    list_runs_args,
    mark_blocked_args,
    record_args,
    reserve_args,
    run_ref_args,
    spend_args,
    start_args,
    submit_args,
)
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import routine_after_run, routine_from_row, run_from_row
from alma_schedule.stores.sql.store_base import Abort, SqlBase
from alma_schedule.stores.sql.store_buffered import end_open_run
from alma_schedule.stores.sql.store_events import append
from alma_schedule.stores.sql.store_finish import finish_at_once, streak_step
from alma_schedule.stores.sql.store_fixed_delay import is_fixed_delay, rearm
from alma_schedule.stores.validation import check_routine_key


def _over_limit(origin: str, starts: Any, schedule: Any) -> bool:
    """A start of a run of ``origin`` that ``max_runs`` refuses (:func:`limits.count_start`)."""
    if isinstance(schedule, str | bytes):  # JSON text, as a driver may hand it back
        schedule = json.loads(schedule)
    if not isinstance(schedule, Mapping):  # a routine row that is gone (the outer join)
        return False
    return limits.count_start(int(starts or 0), limits.limit_of(schedule), origin) is None


def _settlement(rec: RunRecord, cost: int) -> tuple[dict[str, Any], settlement.Settlement]:
    """:func:`alma_schedule.policies.settlement.settle` of the run to ``cost``: the run-row values
    (``reserve_ceilings`` as a JSON list) and the spend moves (in ceiling-key order, the lock order)."""
    money = settlement.settle(rec.reserved_micros, rec.reserve_day, rec.reserve_ceilings, cost)
    values = money.run_values()
    if "reserve_ceilings" in values:
        values["reserve_ceilings"] = list(values["reserve_ceilings"])
    return values, money


class RunsMixin(SqlBase):
    # ------------------------------------------------------------------ helpers

    def _current(self, conn: Connection, key: RunKey, *, lock: bool = False) -> RunRecord | None:
        row = conn.execute(q.SELECT_RUN_LOCKED if lock else q.SELECT_RUN, q.run_params(key)).first()
        return None if row is None else run_from_row(row)

    def _lost(self, conn: Connection, key: RunKey) -> ClaimResult:
        cur = self._current(conn, key)
        return ClaimResult(False, cur, "not_found" if cur is None else "duplicate")

    def _move(self, conn: Connection, money: settlement.Settlement) -> None:
        if money.day is None:
            return
        for m in money.moves:
            conn.execute(q.spend_adjust(m.ceiling, money.day, m.reserved_delta, m.settled_delta))

    def _edge(self, key: RunKey, target: str, now: datetime, values: Mapping[str, Any]) -> ClaimResult:
        with self._tx(single=True) as conn:
            row = conn.execute(*q.cas(key, sorted(EDGES[target]), {"state": target, "state_at": now, **values})).first()
            if row is not None:
                return ClaimResult(True, run_from_row(row), "won")
            return self._lost(conn, key)

    # ------------------------------------------------------------------ transitions

    def start(self, key: RunKey, *, now: datetime, owner: str | None = None, in_window: bool = False) -> ClaimResult:
        """CAS ``claimed -> running`` in ONE statement joined to the routine row, writing ``owner`` and
        ``max_runs``' count; if it moved nothing, a second statement skips an inactive or exhausted
        routine's run (atomically with the release of its buffered fire) or returns the loser's reason.
        docs/architecture.md, section "The modules, in detail" (stores/sql/store_runs.py).
        """
        rk, now, owner = start_args(key, now, owner, in_window)
        joined = self._driver.one_statement  # the routine comes back with the CAS
        start_cas = q.start_cas(with_routine=joined, in_window=in_window)
        for _attempt in range(3):
            with self._tx(single=True) as conn:
                params = q.run_params(key, now=now, owner=owner)
                if not joined:  # counted starts of one routine take turns (PostgreSQL, portable)
                    conn.execute(q.LOCK_COUNTED_ROUTINE, params)
                row = self._driver.one_row(conn, start_cas, params)
                if row is not None:
                    run = run_from_row(row)
                    if joined:
                        routine = routine_after_run(row)
                    else:  # SQLite: read (and counted) in the same (BEGIN IMMEDIATE) transaction
                        routine = routine_from_row(conn.execute(q.select_routine(*rk)).one())
                        if run.origin == limits.COUNTED_ORIGIN and limits.limit_of(routine.schedule) is not None:
                            routine = routine_from_row(conn.execute(q.COUNT_START, params).one())
                    return ClaimResult(True, run, "won", routine=routine)
                found = conn.execute(q.SELECT_RUN_WITH_ROUTINE, q.run_params(key)).first()
            if found is None:
                return ClaimResult(False, None, "not_found")
            rec = run_from_row(found)
            if rec.state != RunState.CLAIMED:
                return ClaimResult(False, rec, supersession.lost_start_reason(rec.state, rec.reason))
            if in_window and now >= rec.expires_at:  # its window closed: never started late (the sweep skips it)
                return ClaimResult(False, rec, "expired")
            m = row_mapping(found)
            if m["r_exists"] is None or m["r_deleted_at"] is not None:
                inactive: str | None = "deleted"
            elif not m["r_enabled"]:
                inactive = "disabled"
            elif m["r_paused_reason"] is not None:
                inactive = "paused"
            elif _over_limit(rec.origin, m["r_schedule_starts"], m["r_schedule"]):
                inactive = Reason.FINISHED  # max_runs: this start would pass it
            else:
                inactive = None  # the routine came back between the two statements: try again
            if inactive is not None:
                skipped = self._skip_inactive(key, inactive, now)
                if skipped is not None:
                    return skipped
        raise StoreConflict(f"run {key} kept changing under start(); try again")

    def _skip_inactive(self, key: RunKey, inactive: str, now: datetime) -> ClaimResult | None:
        """``claimed -> skipped(<inactive>)`` (CAS) and the release of the routine's buffered fire, ONE
        transaction; None when the row was no longer ``claimed``."""
        values = {"state": RunState.SKIPPED, "reason": inactive, "state_at": now, "finished_at": now}
        with self._tx() as conn:
            row = conn.execute(q.select_routine(key.org, key.uid, key.routine_id, lock=True)).first()  # lock order
            if inactive == Reason.FINISHED:  # still over max_runs, the routine locked
                if row is None or not _over_limit(limits.COUNTED_ORIGIN, row.schedule_starts, row.schedule):
                    return None
            skipped, released = end_open_run(conn, key, [RunState.CLAIMED], values, now)
            if skipped is None:
                return None
            return ClaimResult(False, skipped, inactive, released)

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
        """CAS ``running -> submitted`` with the batch / target task id, deadline and first poll."""
        now, values = submit_args(key, now, batch_id, deadline, next_poll_at, target_task_id)
        return self._edge(key, RunState.SUBMITTED, now, values)

    def begin_collecting(self, key: RunKey, *, now: datetime, owner: str | None = None) -> ClaimResult:
        """CAS ``submitted -> collecting`` (writing ``owner`` when given): exactly one caller wins."""
        _, now, owner = start_args(key, now, owner)
        return self._edge(key, RunState.COLLECTING, now, {} if owner is None else {"owner": owner})

    def annotate(self, key: RunKey, values: Mapping[str, Any]) -> RunRecord:
        """Write :data:`ANNOTATABLE` fields of a NON-terminal run (one statement); never its state."""
        _, clean = annotate_args(key, values)
        if "caps_crossed" in clean:  # a JSON list column
            clean["caps_crossed"] = list(clean["caps_crossed"])
        with self._tx(single=True) as conn:
            row = conn.execute(*q.cas(key, sorted(NON_TERMINAL), clean)).first() if clean else None
            if row is not None:
                return run_from_row(row)
            cur = self._current(conn, key)
        if cur is None:
            raise NotFound.of("run", key)
        return cur

    def finish(
        self,
        key: RunKey,
        result: RunResult,
        *,
        now: datetime,
        timers: Timers,
        from_states: Collection[str] | None = None,
    ) -> ClaimResult:
        """The terminal CAS, the failure streak (and the pause latch) and the money settlement, in
        ONE transaction (PostgreSQL: ONE statement unless a buffered fire is to be released or the
        CAS loses: :func:`.store_finish.finish_at_once`). The row is read locked; its state must be in
        ``EDGES[outcome]`` narrowed by ``from_states`` (else a loser: nothing written), and the update is
        guarded on it."""
        args = finish_args(key, result, now, from_states)
        check_timers(timers)
        rk, now, allowed, cost_in, error_class = args.rk, args.now, args.allowed, args.cost, args.error_class
        if self._driver.one_statement:
            done = finish_at_once(self, key, result, now, timers, allowed, cost_in, error_class)
            if done is not None:
                return done
        with self._tx() as conn:
            # lock order: the routine row before the run row, always: a claim buffering the routine's
            # next fire holds it, and the statements after this lock see that fire (and release it)
            locked = conn.execute(q.select_routine(*rk, lock=True)).first()
            touches = streak.touches(result.outcome, result.reason, counts_refused=timers.streak_counts_refused)
            routine = locked if touches else None
            rec = self._current(conn, key, lock=True)
            if rec is None:
                return ClaimResult(False, None, "not_found")
            if rec.state not in allowed:
                return ClaimResult(False, rec, "duplicate")
            cost = settlement.finish_cost(cost_in, rec.cost_micros)
            erase_at = rec.erase_at
            if rec.result_text is not None and erase_at is None:
                erase_at = now + timers.result_retention
            settle, money = _settlement(rec, cost)
            values = {
                "state": result.outcome,
                "reason": result.reason,
                "state_at": now,
                "finished_at": now,
                "cost_micros": cost,
                "error_class": error_class,
                "erase_at": erase_at,
                **settle,
            }
            new, released = end_open_run(conn, key, [rec.state], values, now)
            if new is None:  # the row is locked: cannot happen
                raise StoreConflict(f"run {key} changed under finish(); nothing was written")
            self._move(conn, money)
            if routine is not None:
                streak_step(conn, rk, dict(row_mapping(routine)), result, now, timers)
            if is_fixed_delay(locked):  # the next fire, after the streak step (a latch pauses it)
                rearm(conn, rk, now)
            return ClaimResult(True, new, "won", released)

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
        """The operator's CAS from ANY non-terminal state to ``outcome`` (tenant, ONE transaction);
        settles the reservation to the recorded cost (``cost_micros``, else the stored one); never
        touches the streak; never resends."""
        rk, now, given = record_args(key, outcome, reason, now, cost_micros)
        actor = audit.check_actor(actor)
        with self._tx() as conn:
            locked = conn.execute(q.select_routine(key.org, key.uid, key.routine_id, lock=True)).first()  # lock order
            rec = self._current(conn, key, lock=True)
            if rec is None:
                return ClaimResult(False, None, "not_found")
            if rec.terminal:
                return ClaimResult(False, rec, "duplicate")
            cost = settlement.finish_cost(given, rec.cost_micros)  # the recorded cost
            settle, money = _settlement(rec, cost)
            values = {
                "state": outcome,
                "reason": reason,
                "state_at": now,
                "finished_at": now,
                "cost_micros": cost,
                **settle,
            }
            if rec.state in NON_TERMINAL:  # the open run ends: release the routine's buffered fire
                new, released = end_open_run(conn, key, [rec.state], values, now)
            else:  # a recorded buffered row releases nothing
                new, released = run_from_row(conn.execute(*q.cas(key, [rec.state], values)).one()), None
            if new is None:  # the row is locked: cannot happen
                raise StoreConflict(f"run {key} changed under record(); nothing was written")
            self._move(conn, money)
            append(conn, rk, audit.recorded(now, actor, key.run_id, outcome, reason))
            if is_fixed_delay(locked):
                rearm(conn, (key.org, key.uid, key.routine_id), now)
            return ClaimResult(True, new, "won", released)

    # --- the blocked marker ---

    def mark_blocked(self, key: RunKey, *, why: str, now: datetime, cost_micros: int | None = None) -> bool:
        """Mark a ``running`` run blocked at once: ONE guarded ``UPDATE ... WHERE state = 'running'``
        (the first marker wins; the cost only rises). True when the row was running."""
        _, now, cost = mark_blocked_args(key, why, now, cost_micros)
        with self._tx(single=True) as conn:
            done = conn.execute(q.MARK_BLOCKED, q.run_params(key, now=now, why=why, cost=cost))
            return bool(done.rowcount)

    # --- end the blocked marker ---

    # ------------------------------------------------------------------ money

    def reserve(self, key: RunKey, day: str, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveResult:
        """ONE transaction: a conditional upsert per ceiling (in key order), then the run row; any
        ceiling that would be exceeded rolls everything back (``ok=False`` names the first, in the
        order given)."""
        args = reserve_args(key, day, amount_micros, ceilings)
        amount, keys, limits = args.amount, args.keys, args.limits
        try:
            with self._tx() as conn:
                rec = self._current(conn, key, lock=True)
                if rec is None:
                    raise NotFound.of("run", key)
                if rec.state != RunState.RUNNING or rec.reserve_ceilings:
                    return ReserveResult(False, None, rec)
                exceeded = set()
                for ceiling in sorted(keys):
                    fits = (
                        settlement.fits(0, amount, limits[ceiling])
                        and conn.execute(q.reserve_upsert(self.dialect, ceiling, day, amount, limits[ceiling])).first()
                    )
                    if not fits:
                        exceeded.add(ceiling)
                if exceeded:
                    raise Abort(ReserveResult(False, next(k for k in keys if k in exceeded), rec))
                values = {"reserved_micros": amount, "reserve_day": day, "reserve_ceilings": keys}
                new = run_from_row(conn.execute(*q.cas(key, [RunState.RUNNING], values)).one())
                return ReserveResult(True, None, new)
        except Abort as rolled_back:
            result: ReserveResult = rolled_back.value
            return result

    def release(self, key: RunKey) -> RunRecord | None:
        """Give back the run's whole reservation (ONE transaction)."""
        check_run_key(key)
        with self._tx() as conn:
            rec = self._current(conn, key, lock=True)
            if rec is None:
                return None
            settle, money = _settlement(rec, 0)
            if not money.clears:
                return rec
            self._move(conn, money)
            return run_from_row(conn.execute(*q.cas(key, [rec.state], settle)).one())

    def spend(self, ceiling_key: str, day: str) -> int:
        """Reserved plus settled micro-USD of one ceiling on one day (system read)."""
        ceiling_key, day = spend_args(ceiling_key, day)
        with self._tx(read=True) as conn:
            value = conn.execute(q.select_spend(ceiling_key, day)).scalar()
        return int(value or 0)

    # ------------------------------------------------------------------ reads

    def get(self, key: RunKey) -> RunRecord | None:
        run_ref_args(key)
        with self._tx(read=True) as conn:
            return self._current(conn, key)

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
        stmt = q.list_runs(
            scope.org,
            scope.uid,
            routine_id=routine_id,
            state=state,
            since=since,
            limit=limit,
            before=edge,
        )
        with self._tx(read=True) as conn:
            return [run_from_row(r) for r in conn.execute(stmt).all()]

    def last_completed_delivery(self, scope: Scope, routine_id: str) -> RunRecord | None:
        rk = check_routine_key(scope, routine_id)
        with self._tx(read=True) as conn:
            row = conn.execute(q.last_completed_delivery(*rk)).first()
        return None if row is None else run_from_row(row)
