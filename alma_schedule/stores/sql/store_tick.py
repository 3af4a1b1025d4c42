"""The tick's claims of :class:`~alma_schedule.stores.sql.SqlStore`: ``claim_due``, ONE transaction
with a constant number of statements per batch (cost O(due), statements in :mod:`.queries.claim`):
lock the due routines, decide each with the policies, advance the cursors, supersede, insert the runs,
count ``max_runs``. PostgreSQL's forms follow the driver's ``fast_claim`` (docs/architecture.md,
section "The modules, in detail", ``stores/sql/store_tick.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from alma_schedule.core.fires import fire_id
from alma_schedule.errors import StoreConflict
from alma_schedule.model import (
    ClaimBatch,
    ClaimScan,
    Fire,
    Routine,
    RunRecord,
    RunState,
)
from alma_schedule.model.tick import merge_kinds
from alma_schedule.policies import overlap, supersession
from alma_schedule.settings import Timers
from alma_schedule.stores.arguments import claim_due_args
from alma_schedule.stores.fast import Staging
from alma_schedule.stores.postgres import hot
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.decisions import Decided, decide_rows, opening
from alma_schedule.stores.sql.rows import (
    new_record,
    planning_routine,
    planning_routines,
    record_with,
    run_from_row,
)
from alma_schedule.stores.sql.store_base import RKey, SqlBase
from alma_schedule.stores.sql.store_buffered import replacing as replacing_buffered
from alma_schedule.stores.sql.store_inserts import HeldCheck, check_duplicates, insert_fires

log = logging.getLogger("alma_schedule.stores")


def _each_planned(rows: Sequence[Any]) -> list[Routine]:
    """SQLite's rows of ``select_due(planning=True)``, as routines."""
    return [planning_routine(row) for row in rows]


class TickMixin(SqlBase):
    def claim_due(
        self,
        now: datetime,
        limit: int,
        decide: Callable[[Routine], Any],
        timers: Timers,
        scan: ClaimScan | None = None,
        staging: Staging | None = None,
    ) -> ClaimBatch:
        """System, ONE transaction, a constant number of statements per batch. PostgreSQL: a short batch
        is followed by the claim of the rows another transaction held; ``scan`` and ``staging`` are used.
        docs/architecture.md, section "The modules, in detail" (stores/sql/store_tick.py).
        """
        now, limit = claim_due_args(now, limit, decide, timers, scan, staging)
        pg = self._driver.fast_claim
        keyed = scan if pg else None
        decided: list[RKey] = []
        held_due = False
        with self._scanned(keyed) as token, self._tx(custom_plans=True) as conn:  # token closed after commit
            after = keyed.after if keyed is not None else None
            stmt = q.select_due(now, limit, lock=True, planning=True, after=after, at=pg)
            made = self._decided(conn, stmt, now, decide, timers, opening(keyed, token))  # as the rows arrive
            due = made.due
            short = len(due) < limit
            check: HeldCheck | None = None
            # the held rows' check, before the commit (in the INSERT if any): a short batch's; and the
            # scan's FULL first batch's, in its INSERT only, which ends the scan when nothing else is due
            if pg and (short or (keyed is not None and after is None)):
                decided = [(r.org, r.uid, r.routine_id) for r in due]
                check = HeldCheck(now, decided + (keyed.others(token) if keyed is not None else []))
            batch = self._claim_locked(conn, made, now, timers, check, staging if pg else None)
            if check is not None and short:
                if check.found is None:  # no INSERT returned a row: its own statement
                    check.found = bool(self._rows(conn, *q.due_exists(now, check.besides))[0][0])
                held_due = check.found
            elif check is not None and check.found is False and keyed is not None:
                keyed.exhaust()
        if held_due:
            held = self._claim_held(now, limit - len(due), decide, timers, decided, keyed)
            if held is not None:
                batch = batch + held
        return batch

    @staticmethod
    @contextmanager
    def _scanned(scan: ClaimScan | None) -> Iterator[int]:
        """A token of ``scan`` for one transaction, closed when it ends (after its commit or rollback)."""
        token = scan.token() if scan is not None else -1
        try:
            yield token
        finally:
            if scan is not None:
                scan.close(token)

    def _claim_held(
        self,
        now: datetime,
        limit: int,
        decide: Callable[[Routine], Any],
        timers: Timers,
        decided: list[RKey],
        scan: ClaimScan | None,
    ) -> ClaimBatch | None:
        """The due rows a short batch skipped while another transaction held them, claimed in ONE
        transaction that WAITS for them (due order, at most ``HELD_LOCK_WAIT``), never one it ``decided``
        nor one the ``scan``'s other open batches hold; a longer hold is left to the next tick (logged).
        docs/architecture.md, section "The modules, in detail" (stores/sql/store_tick.py)."""
        try:
            with self._scanned(scan) as token, self._tx(custom_plans=True) as conn:
                conn.execute(q.HELD_LOCK_WAIT)
                besides = decided + (scan.others(token) if scan is not None else [])
                stmt = q.select_due(now, limit, lock=True, wait=True, besides=besides, planning=True, at=True)
                made = self._decided(conn, stmt, now, decide, timers, opening(scan, token))
                return self._claim_locked(conn, made, now, timers)
        except StoreConflict as exc:  # lock_timeout (or a deadlock victim): nothing was written
            log.warning("claim of due routines held by another transaction deferred to the next tick: %s", exc)
            return None

    def _decided(
        self,
        conn: Any,
        stmt: tuple[Any, Any],
        now: datetime,
        decide: Callable[[Routine], Any],
        timers: Timers,
        locked: Callable[[list[Routine]], None] | None,
    ) -> Decided:
        """Steps 1 and 2 of the module docstring: the rows ``select_due(planning=True)`` locked, each
        built (:func:`planning_routine`) and decided (:func:`.decisions.decide_rows`); ``locked`` is
        told the routines locked so far before they are decided. PostgreSQL streams them
        (:meth:`..postgres.driver.PostgresDriver.locked`)."""
        chunks, addressed = self._driver.locked(conn, stmt)
        build = planning_routines if addressed else _each_planned
        return decide_rows(chunks, build, decide, now, timers, addressed=addressed, locked=locked)

    def _claim_locked(
        self,
        conn: Any,
        made: Decided,
        now: datetime,
        timers: Timers,
        held: HeldCheck | None = None,
        staging: Staging | None = None,
    ) -> ClaimBatch:
        """Steps 3-7 of the module docstring over the routines this transaction locked and decided;
        ``held`` (PostgreSQL): the short batch's check, answered by its first INSERT when that returns
        a row; ``staging``: see :meth:`claim_due`. On PostgreSQL each fire's routine row is reached at
        its address (the cursor moves' TID scan)."""
        d = self.dialect
        fires, not_due, defers, deferred = made.fires, made.not_due, made.defers, made.deferred
        fast = self._driver.fast_claim
        at = made.row_addresses if fast else None
        # PostgreSQL: the cursor moves ride in the supersede's statement when there is one (step 4)
        carried = fast and any(not f.missed for _, f in fires)
        collapsing = bool(made.missed)  # some fire collapsed fires: the cursor moves count them
        if fires and not carried:
            self._exec(conn, *q.advance_cursors(d, fires, now, counting=collapsing))
        if not_due:
            conn.execute(*q.move_due(d, not_due, now))
        if defers:
            conn.execute(*q.defer_batch(d, defers, now))
        claimed, skipped, buffered = (
            self._insert_fires(conn, fires, now, timers, carried, held, at, staging, collapsing)
            if fires
            else ([], [], [])
        )
        if any(f.collided for _, f in fires):
            skipped.extend(self._insert_collided(conn, fires, now))
        return ClaimBatch(tuple(claimed), tuple(skipped), tuple(deferred), tuple(buffered), merge_kinds(made.missed))

    def _insert_collided(self, conn: Any, fires: list[tuple[Routine, Fire]], now: datetime) -> list[RunRecord]:
        """The ``skipped(calendar)`` rows of the claims' collided fires (a business calendar), each
        under its own instant's run id, terminal at once; one whose run key exists is left as it is."""
        state, reason = supersession.CALENDAR
        records = [
            new_record(
                (r.org, r.uid, r.routine_id),
                fire_id(instant),
                state=state,
                reason=reason,
                origin="schedule",
                config_revision=r.config_revision,
                fire_at=instant,
                now=now,
                expires_at=instant,
            )
            for r, f in fires
            for instant in f.collided
        ]
        by_key = {(x.org, x.uid, x.routine_id, x.run_id): x for x in records}
        return list(insert_fires(self._driver, self.dialect, conn, list(by_key.values()), by_key).values())

    def _insert_fires(
        self,
        conn: Any,
        fires: list[tuple[Routine, Fire]],
        now: datetime,
        timers: Timers,
        advance: bool = False,
        held: HeldCheck | None = None,
        at: list[str] | None = None,
        staging: Staging | None = None,
        collapsing: bool = False,
    ) -> tuple[list[RunRecord], list[RunRecord], list[RunRecord]]:
        """Steps 4-6: make room (supersede; replace buffered rows), insert, record the blocked;
        ``advance`` (PostgreSQL, some fire live): step 3's cursor moves go in the supersede's
        statement (reaching the rows at ``at``, their addresses, when given; ``collapsing``: they
        count collapsed fires); ``held``: the short batch's check, in the first INSERT."""
        d = self.dialect
        keys = [(r.org, r.uid, r.routine_id, f.run_id) for r, f in fires]  # each fire's run key
        live = [key for key, (_, f) in zip(keys, fires, strict=True) if not f.missed]
        latest = [key for key, (_, f) in zip(keys, fires, strict=True) if f.buffer and not f.missed]
        superseded: dict[RKey, RunRecord] = {}
        blocked: set[RKey] = set()  # PostgreSQL: routines whose open run the supersede left open
        advancing = fires if advance else []
        missed_state, missed_reason = supersession.MISSED
        claimed_state, resend_first = RunState.CLAIMED, now + timers.resend_first
        # PostgreSQL: the statements that make room are sent at once, in order (the latest routines'
        # open runs locked, their buffered rows replaced, the supersede with the cursor moves) and
        # run by the server while the records are built; their answers come after the block
        sending: list[tuple[Any, Any]] = []
        pg = self._driver.fast_claim
        if latest and pg:  # the runs a buffered fire would wait behind: held to the commit
            sending.append(q.lock_open_runs([k[:3] for k in latest]))
        replacing = replacing_buffered(self._driver, d, latest, now)
        first = len(sending) + len(replacing)  # the first supersede's answer
        sending.extend(replacing)
        for chunk in self._driver.chunks(live):
            sending.append(q.supersede(d, chunk, now, advancing, at if advancing else None, collapsing))
            advancing = []
        counting = None  # PostgreSQL: max_runs' count rides in the INSERT, counting what it inserts claimed
        columns: q.Columns | None = None
        rendered: dict[str, Any] = {}
        with self._meanwhile(conn, *sending) as sent:
            records = [
                new_record(
                    key[:3],
                    f.run_id,
                    state=missed_state if f.missed else claimed_state,
                    reason=missed_reason if f.missed else None,
                    origin="schedule",
                    config_revision=r.config_revision,
                    fire_at=f.fire_at,
                    now=now,
                    expires_at=f.expires_at,
                    resend_at=None if f.missed else (f.resend_at or resend_first),
                    due_at=f.due_at,
                )
                for key, (r, f) in zip(keys, fires, strict=True)
            ]
            by_key = dict(zip(keys, records, strict=True))
            routine_keys = [key[:3] for key in keys]
            buffering = {key for key, (_, f) in zip(keys, fires, strict=True) if f.buffer}
            if pg:  # the INSERT's arrays and the count, built while the server makes room
                columns = q.record_columns(records)
                rendered = {name: hot.array_literal(values) for name, values in columns.items()}
                limited = [(r, f.max_runs) for r, f in fires if f.max_runs is not None]
                rows = [{"org": r.org, "uid": r.uid, "routine_id": r.routine_id, "max_runs": n} for r, n in limited]
                counting = (now, rows) if rows else None
        replaced = [run_from_row(row) for answer in sent[first - len(replacing) : first] for row in answer()]
        ended: dict[RKey, Any] = {}  # the superseded rows, made records while the INSERT runs
        for row in (row for answer in sent[first:] for row in answer()):
            if row[4] is not None:
                ended[row[:3]] = row
            elif not row[3]:  # not matched
                blocked.add(row[:3])
        # A fire blocked by its routine's non-terminal run is recorded skipped(overlap), or buffered
        # (overlap latest: it waits, with its claim's resend_at): in the first insert when the
        # supersede's probe saw the blocking run, else when its claim lost to that run (then a
        # second insert; a duplicate, whose run key exists, conflicts on the key in both).
        overlap_state, overlap_reason = supersession.OVERLAP

        def blocked_record(key: Any, rec: RunRecord) -> RunRecord:
            if key in buffering:
                return record_with(rec, state=overlap.BUFFER_STATE)
            return record_with(rec, state=overlap_state, reason=overlap_reason, resend_at=None, finished_at=now)

        if blocked:
            for i, rk in enumerate(routine_keys):
                if rk in blocked and records[i].state == claimed_state:
                    key = keys[i]
                    records[i] = by_key[key] = blocked_record(key, records[i])
                    if columns is not None:
                        q.patch_columns(columns, i, records[i], rendered)

        built_ahead = (columns, rendered) if columns is not None else None

        def superseded_records() -> None:
            superseded.update((rk, run_from_row(row[4:])) for rk, row in ended.items())

        inserted = insert_fires(
            self._driver, self.dialect, conn, records, by_key, held, staging, counting, built_ahead, superseded_records
        )
        lost = [blocked_record(k, rec) for k, rec in by_key.items() if k not in inserted and rec.state == claimed_state]
        if lost:
            inserted.update(
                insert_fires(
                    self._driver, self.dialect, conn, lost, {(x.org, x.uid, x.routine_id, x.run_id): x for x in lost}
                )
            )
        check_duplicates(self._driver, conn, [k for k in by_key if k not in inserted])
        claimed: list[RunRecord] = []
        skipped: list[RunRecord] = list(replaced)
        buffered: list[RunRecord] = []
        counted: list[dict[str, Any]] = []
        for key, (r, f) in zip(keys, fires, strict=True):
            made = inserted.get(key)
            if made is None:  # a duplicate: no row, and (guarded in SQL) nothing superseded or replaced
                continue
            if superseded:
                gone = superseded.get(key[:3])
                if gone is not None:
                    skipped.append(gone)
            if made.state == claimed_state:
                claimed.append(made)
                if f.max_runs is not None and counting is None:
                    counted.append({"org": r.org, "uid": r.uid, "routine_id": r.routine_id, "max_runs": f.max_runs})
            else:
                (buffered if made.state == RunState.BUFFERED else skipped).append(made)
        if counted:  # max_runs (SQLite): no statement at all for a batch without limited routines
            self._exec(conn, *q.count_claims(d, counted, now))
        return claimed, skipped, buffered
