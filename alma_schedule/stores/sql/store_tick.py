"""The tick's claims of :class:`~alma_schedule.stores.sql.SqlStore`: ``claim_due`` (``claim_manual``:
:mod:`.store_inserts`; the sweeps, ``take_resends``, ``take_polls`` and the peeks: :mod:`.store_sweeps`).

``claim_due`` is ONE transaction with a constant number of statements per batch, whatever the
batch size (cost O(due), never O(routines); statements in :mod:`.queries.claim`, built once):

1. lock up to ``limit`` due routines (``FOR UPDATE SKIP LOCKED``; SQLite: ``BEGIN IMMEDIATE``),
   read without their definition (planning never reads it); PostgreSQL streams them
   (:func:`.ahead.streamed`: :data:`STREAM_CHUNK` rows at a time, as the server sends them);
2. ask ``decide`` for each, in Python (the cron math stays in the core), a chunk as soon as it
   arrived (the scan records the chunk's rows as this batch's first);
3. one batched UPDATE advancing the cursors (``WHERE last_fire IS NULL OR last_fire < fire``; on
   PostgreSQL, when some fire is live, a data-modifying CTE of step 4's statement: one round trip
   less), adding the fires each claim collapsed to ``fires_missed`` when some did (issue 44: a shape
   with one more array; none on a steady tick), one for ``NotDue`` and one for ``Defer`` (only when
   there are any);
4. one UPDATE superseding older schedule ``claimed`` runs to ``skipped(missed)`` (CAS, RETURNING;
   PostgreSQL: sent in pipeline mode with the statements before it, the run records and step 5's
   column arrays are built while the server runs them, a blocked fire's row patched after),
   skipping a fire whose own run key exists (a duplicate supersedes nothing); each routine's open run
   is probed through ``uq_runs_one_active``, never found by hashing every open run of the table
   (:func:`~alma_schedule.stores.sql.queries.common.end_runs_for_fires`: O(fires) per batch); on
   PostgreSQL (a data-modifying CTE) it also reports the open runs it did not supersede: the fires
   they block;
5. one INSERT of the run rows with an UNTARGETED ``ON CONFLICT DO NOTHING RETURNING`` (a targeted
   one raises on the partial unique index), a reported blocked fire already ``skipped(overlap)``,
   or ``buffered`` for an ``overlap: latest`` routine (``Fire.buffer``); a claim it did not take lost
   to the routine's non-terminal run (SQLite, whose step 4 reports nothing; a run that changed since
   the probe), or is a duplicate: only then one more INSERT records the blocked ones so, and
   conflicts on the key for a duplicate; a fire left with no row is checked to be a duplicate (one
   read, only then; anything else rolls back). PostgreSQL sends it in pipeline mode and calls the
   caller's ``staging`` with the records it is about to claim while the server runs it (the tick
   builds their messages then: :mod:`alma_schedule.tasks.staged`);
6. ``max_runs`` (only when the batch holds a fire of a limited routine): one UPDATE counting the
   claims in ``schedule_claims`` and clearing ``next_due_at`` of the routines it finishes
   (:mod:`alma_schedule.policies.limits`); on PostgreSQL a data-modifying CTE of step 5's INSERT
   that counts only the rows that INSERT returned ``claimed`` (no statement of its own).

On PostgreSQL a SHORT batch ends, before its commit, with one unlocked EXISTS of the due rows it
did not decide (a last ``RETURNING`` column of its step-5 INSERT, so no round trip of its own, when
that INSERT returns a row; else its own statement: :class:`.store_inserts.HeldCheck`); only when
there are some, it is followed by the claim of the rows it skipped because another transaction held
them (``_claim_held``): a fire whose only tick in its window met its
routine's row held for a moment (its previous run finishing) is not lost. The FULL first batch of a
scan carries the same check in its INSERT (never a statement of its own): when it finds no other due
row, the batch calls ``ClaimScan.exhaust`` and the tick starts no further batch, which would only
have found none (a tick of exactly ``claim_limit`` due fires: one batch, not three).

The batches of one tick share a :class:`~alma_schedule.model.ClaimScan` (PostgreSQL; SQLite claims
one batch at a time and ignores it): step 1 starts past the greatest due key an earlier batch of the
scan locked, an index bound, so a tick of B batches walks its due rows once instead of B/2 times on
average (the rows behind it are already locked, decided, or were passed over while held, which the
short batch's EXISTS, reading from the start, catches); and the EXISTS and the held claim leave out
the rows the scan's other OPEN batches hold (they decide them: waiting for one would only wait for
that batch's commit).

Only when the batch holds fires of ``latest`` routines, two more statements before step 4: on
PostgreSQL one locks their open runs (a fire buffered behind a run must not see that run end
unseen before the claim commits: the expiry sweep skips locked rows, and every transaction that
ends an open run locks its routine row first), then one UPDATE moves their older ``buffered`` rows
to ``skipped(overlap)`` (:mod:`.store_buffered`; a duplicate replaces nothing): a tick without
such a routine issues exactly the statements above.

Steps 4 and 5 are :func:`alma_schedule.policies.supersession.place` expressed set-based (its
constants build the statements); step 3's ``Defer`` update is :func:`~alma_schedule.policies.backoff.deferred`.

Steps 3 and 4 share one statement on PostgreSQL (when a fire is live): the cursor UPDATE, a CTE,
writes only ``routines`` rows this transaction locked in step 1, which the rest of that statement
never reads. The whole claim in a single CTE could not do this: SQLite has no DML in a CTE, and in
PostgreSQL all parts of one statement share a snapshot, so a racing manual claim could leave an
advanced cursor with no row.
Every insert of a run locks its routine row first (here and in ``claim_manual``), so nothing
inserts runs of a routine between steps 4 and 5; every transaction that ends a routine's open run
locks the routine row first too, so the run a claim found blocking stays open until it commits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

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
from alma_schedule.stores.base import Staging
from alma_schedule.stores.sql import ahead, hot
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.decisions import Decided, decide_rows, opening
from alma_schedule.stores.sql.rows import (
    new_record,
    planning_routine,
    planning_routines,
    record_with,
    run_from_row,
)
from alma_schedule.stores.sql.store_base import RKey
from alma_schedule.stores.sql.store_inserts import HeldCheck, InsertsMixin

log = logging.getLogger("alma_schedule.stores")

#: The locked due rows decided at a time on PostgreSQL, as they arrive (:meth:`TickMixin._decided`):
#: a chunk's routines are built and decided while the database locks and sends the next ones.
STREAM_CHUNK = 100


def _each_planned(rows: Sequence[Any]) -> list[Routine]:
    """SQLite's rows of ``select_due(planning=True)``, as routines."""
    return [planning_routine(row) for row in rows]


class TickMixin(InsertsMixin):
    def claim_due(
        self,
        now: datetime,
        limit: int,
        decide: Callable[[Routine], Any],
        timers: Timers,
        scan: ClaimScan | None = None,
        staging: Staging | None = None,
    ) -> ClaimBatch:
        """System, ONE transaction, a constant number of statements (see the module docstring); on
        PostgreSQL a short batch is followed by the claim of the due rows it skipped while another
        transaction held them (:meth:`_claim_held`). With a ``scan`` (PostgreSQL) the batch starts
        past the due key where the scan's earlier batches stopped, and its held-rows check leaves
        the rows the scan's other open batches hold to them. PostgreSQL calls ``staging`` with the
        records the batch is about to claim while the database runs its INSERT (SQLite, where
        nothing runs meanwhile, and the claim of held rows after a short batch never call it)."""
        now, limit = claim_due_args(now, limit, decide, timers, scan, staging)
        pg = self.dialect == "postgresql"
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
        """The due rows a short batch skipped while another transaction held them (a finishing run,
        a registration, another tick), never one it ``decided`` (a catching-up routine may still be
        due after its fire: the next batch's, as before) nor one the ``scan``'s other open batches
        hold (they decide it). Called only when the short batch's own transaction, after its claims
        and before its commit, found such a row with one unlocked read (its rows and the scan's held
        ones excluded by key, the others read as committed, as after the commit: one statement, no
        transaction of its own); then ONE transaction that WAITS for them (in the due order, at most
        ``HELD_LOCK_WAIT``) and claims them; a row another tick claimed meanwhile is re-checked and
        no longer due. A longer hold is left to the next tick (logged)."""
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
        told the routines locked so far before they are decided. PostgreSQL (``at=True``: each row's
        address last) streams them, :data:`STREAM_CHUNK` rows at a time, and decides the first while
        the database still locks and sends the others."""
        if self.dialect != "postgresql":
            rows = conn.execute(*stmt).all()
            return decide_rows([rows], _each_planned, decide, now, timers, addressed=False, locked=locked)
        chunks = ahead.streamed(conn, stmt[0], self.schema, stmt[1], STREAM_CHUNK)
        return decide_rows(chunks, planning_routines, decide, now, timers, addressed=True, locked=locked)

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
        at = made.fire_at if d == "postgresql" else None
        # PostgreSQL: the cursor moves ride in the supersede's statement when there is one (step 4)
        carried = d == "postgresql" and any(not f.missed for _, f in fires)
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
        return ClaimBatch(tuple(claimed), tuple(skipped), tuple(deferred), tuple(buffered), merge_kinds(made.missed))

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
        if latest and d == "postgresql":  # the runs a buffered fire would wait behind: held to the commit
            sending.append(q.lock_open_runs([k[:3] for k in latest]))
        replacing = self._replacing(latest, now)
        first = len(sending) + len(replacing)  # the first supersede's answer
        sending.extend(replacing)
        for chunk in self._chunks(live):
            sending.append(q.supersede(d, chunk, now, advancing, at if advancing else None, collapsing))
            advancing = []
        pg = d == "postgresql"
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

        inserted = self._insert(conn, records, by_key, held, staging, counting, built_ahead, superseded_records)
        lost = [blocked_record(k, rec) for k, rec in by_key.items() if k not in inserted and rec.state == claimed_state]
        if lost:
            inserted.update(self._insert(conn, lost, {(x.org, x.uid, x.routine_id, x.run_id): x for x in lost}))
        self._check_duplicates(conn, [k for k in by_key if k not in inserted])
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
