"""The storage protocol: every backend (memory, SQLite, PostgreSQL) implements :class:`Store`.

Conventions (all backends, checked by the contract suite in :mod:`alma_schedule.testing`):

* Every method is ONE transaction unless its docstring says otherwise: it either happens entirely or
  not at all. Datetimes in and out are aware UTC; money is integer micro-USD.
* Tenant operations take a :class:`Scope` and can reach nothing outside it (another org's routine is
  "not found"). System operations are named ``system`` in their docstring and cross every scope.
* Guarded transitions are compare-and-set on one edge of the state table in docs/architecture.md
  (:data:`alma_schedule.model.EDGES`) and return :class:`ClaimResult`: a loser gets the current
  record and a reason, never an exception. Nothing moves backwards; nothing moves on age.
* At most ONE non-terminal run (``claimed``, ``running``, ``submitted``, ``collecting``) exists per
  routine: a database constraint (partial unique index) enforces it, not a read. Beside it, at
  most ONE ``buffered`` fire (overlap ``latest``; its own partial unique index), which no owner
  moves: every write that moves the open run to a terminal state releases it, in the SAME
  transaction, to ``claimed`` (or ``skipped(missed)`` past its window) and returns it as
  ``ClaimResult.released`` for the caller to send after the commit.
* The system half (peeks, operator lists, heartbeat, maintenance) is :class:`SystemStore`
  (:mod:`.system`), which :class:`Store` extends.
* The store holds no policy: instants, expiries, back-offs and thresholds come from the caller
  (``decide``, :class:`Timers`); the rules are the pure functions of :mod:`alma_schedule.policies`.
* Bad input raises :class:`InvalidInput` before anything is written; driver errors are mapped to
  :class:`StoreError` subclasses at one boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from alma_schedule.model import (
    Backfill,
    BackfillStep,
    Ceiling,
    ClaimBatch,
    ClaimResult,
    ClaimScan,
    Decision,
    Resends,
    ReserveResult,
    Routine,
    RoutineVersion,
    RunKey,
    RunRecord,
    RunResult,
    Scope,
)
from alma_schedule.settings import Timers
from alma_schedule.stores.system import Derive as Derive
from alma_schedule.stores.system import SystemStore

Decide = Callable[[Routine], Decision]
Staging = Callable[[Sequence[RunRecord]], object]  # claim_due's (see there)
PlanBackfill = Callable[[Routine, Backfill], BackfillStep | None]


@runtime_checkable
class Store(SystemStore, Protocol):
    # ------------------------------------------------------------------ routines (tenant)

    def put_routine(self, routine: Routine, *, now: datetime, expected_revision: str | None = None) -> Routine:
        """Register or re-register (tenant, atomic). The caller computed every field of the row.

        Inserts, or replaces the existing row's kind/schedule/definition/config_revision/
        registered_at/last_fire/next_due_at (keeping enabled, paused_reason, the streak and the
        created_at unless the row was tombstoned: then it starts afresh). ``expected_revision`` is a
        CAS on the current revision (None = the row must not exist or be tombstoned); a mismatch
        raises :class:`StoreConflict`. Appends a :class:`RoutineVersion` when the revision is new.
        A tombstoned id with a non-terminal run is refused with :class:`RegistrationRefused`
        naming the blocking run. ``tzdata_version`` is replaced too; ``next_due_at`` is NULL while
        the kept row is paused or disabled. A fresh row takes ``routine``'s fields, the back-off
        cleared, ``schedule_claims``/``fires_missed`` 0; a kept row keeps them (``claim_due``'s)."""
        ...

    def set_enabled(
        self, scope: Scope, routine_id: str, enabled: bool, *, now: datetime, next_due_at: datetime | None
    ) -> Routine:
        """Disable (``next_due_at`` NULL) or enable (restart: ``last_fire = now``, streak 0, the given
        ``next_due_at`` unless paused). Tenant, atomic. :class:`NotFound` for unknown or deleted ids.
        Already in the requested state: a no-op (the row is returned unchanged)."""
        ...

    def set_paused(
        self, scope: Scope, routine_id: str, reason: str | None, *, now: datetime, next_due_at: datetime | None
    ) -> Routine:
        """Pause with ``reason`` (``next_due_at`` NULL; an existing reason is KEPT: the first wins),
        or resume with None (reason cleared, streak 0, ``last_fire = now``, the given ``next_due_at``
        unless disabled). Tenant, atomic. :class:`NotFound` for unknown or deleted ids. Resuming a
        routine that is not paused is a no-op."""
        ...

    def delete_routine(self, scope: Scope, routine_id: str, *, now: datetime) -> Routine:
        """Tombstone (``deleted_at = now``, ``next_due_at`` NULL). Tenant, atomic; idempotent (a
        repeat keeps the first ``deleted_at``). :class:`NotFound` for unknown ids."""
        ...

    def get_routine(self, scope: Scope, routine_id: str, *, include_deleted: bool = False) -> Routine | None:
        """One routine of this scope (tenant)."""
        ...

    def list_routines(
        self, scope: Scope, *, include_deleted: bool = False, limit: int = 1000, after: str | None = None
    ) -> list[Routine]:
        """The scope's routines ordered by id (code point order, i.e. ``COLLATE "C"``), ``after`` an
        id for paging (tenant)."""
        ...

    def routine_versions(self, scope: Scope, routine_id: str) -> list[RoutineVersion]:
        """The immutable version history, oldest first (tenant)."""
        ...

    # ------------------------------------------------------------------ the tick (system)

    #: How many ``claim_due`` calls one process may usefully run at once (each its own transaction,
    #: each locking routines the others skip): PostgreSQL its pool size, 1 where writers serialize
    #: anyway (SQLite, memory). The tick runs at most this many batches at once (engine/claims.py).
    claim_concurrency: int

    def claim_due(
        self,
        now: datetime,
        limit: int,
        decide: Decide,
        timers: Timers,
        scan: ClaimScan | None = None,
        staging: Staging | None = None,
    ) -> ClaimBatch:
        """System, ONE transaction, a constant number of statements per batch.

        Locks up to ``limit`` routines with ``next_due_at <= now`` and not deferred
        (``defer_until`` NULL or ``<= now``), oldest ``next_due_at`` first, skipping rows locked by a
        concurrent claimer. Calls ``decide`` once per routine (pure; an exception from it is treated
        as ``Defer(now + Timers.backoff(defer_first, defer_max, error_count), repr(exc))``); the
        routine it gets may carry an empty ``definition`` (planning never reads it: the SQL store
        does not fetch it).
        Then: ``Fire`` advances the cursor (``WHERE last_fire < fire_at``, ``next_due_at``, clears
        the error back-off, adds the Fire's ``fires_missed`` (0 to 10,000; 10,000 latches
        ``fires_missed_capped``: :mod:`alma_schedule.policies.missed`) in that same write) and, in a
        NEW statement, inserts the run row: ``claimed`` (``resend_at`` from the Fire or ``now +
        timers.resend_first``), or
        ``skipped(overlap)`` when the routine has a non-terminal run other than an older schedule
        ``claimed`` one, which is superseded to ``skipped(missed)`` first (CAS, same transaction);
        with ``Fire.buffer`` (overlap ``latest``) such a blocked fire is inserted ``buffered``
        instead, and the routine's older buffered row (if any) becomes ``skipped(overlap)``: ONE more
        statement, issued only when the batch holds a ``buffer`` fire.
        ``Fire(missed=True)`` records ``skipped(missed)``. ``NotDue`` only moves ``next_due_at``.
        ``Defer`` sets ``defer_until``/``last_error`` and bumps ``error_count``. The returned
        :class:`ClaimBatch` lists claimed rows, skipped rows (overlap, missed, superseded and
        replaced buffered rows), deferrals (``first`` True when the routine's ``error_count`` was 0)
        and the rows inserted ``buffered``, and the fires the cursor moves collapsed, by kind
        (``fires_missed``). Every inserted row stores the Fire's ``due_at`` (its jittered instant;
        ``fire_at`` when none). A ``fires_missed`` outside 0..10,000 is a bad answer (deferred).

        ``max_runs`` (issue 15): for each ``claimed`` row inserted from a ``Fire`` whose ``max_runs``
        is set, the same transaction adds 1 to the routine's ``schedule_claims`` and, when that
        reaches ``max_runs``, sets ``next_due_at`` NULL in the same statement (SQL: one batched
        UPDATE after the insert, none for a batch without such fires). Skipped and buffered rows
        never count.

        ``scan``: the :class:`~alma_schedule.model.ClaimScan` the batches of ONE tick share (the tick
        passes one; None: a batch on its own). A store may start a batch past the due rows the
        scan's earlier batches locked, and leave the rows its other open batches hold to them;
        what is claimed does not change: a due row a batch passed over while another transaction
        held it is claimed as without a scan (SQL: the claim of held rows after a short batch).

        ``staging``: a store MAY call it (PostgreSQL does, while the database runs the batch's
        INSERT), at most once a batch, inside its transaction, with the records it is about to insert
        ``claimed`` (never none), in ``claimed``'s order: the caller builds their messages then and
        sends them only after the batch returned. A hint: ``claimed`` is what was claimed (fewer when
        a fire was lost or a duplicate); an exception from ``staging`` rolls the batch back.
        """
        ...

    def claim_manual(self, key: RunKey, *, now: datetime, expires_at: datetime, resend_at: datetime) -> ClaimResult:
        """Tenant, atomic: lock the routine row, then insert a ``claimed`` manual run.

        Refused (``won=False``) with reason ``deleted``/``disabled``/``paused`` (record None), with
        ``overlap`` and the blocking record while the routine has any non-terminal run, or
        ``not_found``. Never moves the cursor. The row's ``fire_at`` and ``due_at`` are ``now``.
        """
        ...

    def take_resends(self, now: datetime, limit: int, timers: Timers, *, send: bool = True) -> Resends:
        """System, atomic. First expires: ``claimed`` and ``buffered`` rows with ``expires_at <= now``
        become ``skipped(missed)`` (always, even with ``send=False``); a fire buffered behind an
        expired manual run is released to ``claimed`` with ``resend_at = now``. Then, if ``send``, takes up to
        ``limit`` ``claimed`` rows with ``resend_at <= now`` (skip-locked), bumps ``send_attempts``
        and pushes ``resend_at`` by ``backoff(resend_first, resend_max, attempts)`` in the same
        statement, so concurrent callers take each row once. Each list holds at most ``limit``
        rows; a row past ``expires_at`` is never re-sent."""
        ...

    def take_polls(self, now: datetime, limit: int, timers: Timers) -> list[RunRecord]:
        """System, atomic: up to ``limit`` ``submitted`` rows with ``next_poll_at <= now`` (skip-locked),
        ``poll_attempts`` bumped and ``next_poll_at`` pushed by ``backoff(poll_first, poll_max, attempts)``."""
        ...

    # ------------------------------------------------------------------ run transitions

    def start(self, key: RunKey, *, now: datetime, owner: str | None = None, in_window: bool = False) -> ClaimResult:
        """CAS ``claimed -> running`` in one statement joined to the routine row, writing ``owner``
        (who runs it: :mod:`alma_schedule.policies.ownership`; None = nobody Celery could report
        lost; :class:`InvalidInput` unless 1 to 1024 characters without NUL). If the routine is
        deleted, disabled or paused the row becomes ``skipped`` with that reason instead (and the
        result has ``won=False``, reason = that state). A loser gets ``superseded`` (the row is
        skipped(missed)), ``duplicate`` (any other state), or ``not_found``, with the current record.
        The inactive-routine skip and the release of the routine's buffered fire are ONE
        transaction (``released``). With ``in_window`` (the engine's), a ``claimed`` run whose window
        has closed (``now >= expires_at``) is not started and not written: ``expired`` (the tick's
        sweep records it ``skipped(missed)``), checked by the CAS itself. A won start carries the
        routine row its CAS joined (``routine``), so the runner needs no read of its own. Every
        guarded write below answers a wrong edge with ``duplicate`` and the unchanged record."""
        ...

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
        """CAS ``running -> submitted`` recording the batch id / target task id, deadline and first poll."""
        ...

    def begin_collecting(self, key: RunKey, *, now: datetime, owner: str | None = None) -> ClaimResult:
        """CAS ``submitted -> collecting``: exactly one caller wins, ONE statement; ``owner`` (the
        collector's Celery request id) is written by the CAS, so a collector whose answer was lost
        can tell from the row that it won."""
        ...

    def annotate(self, key: RunKey, values: Mapping[str, Any]) -> RunRecord:
        """Write the fields of :data:`ANNOTATABLE` on a NON-terminal run (never its state).
        :class:`InvalidInput` for other fields; a terminal run is left unchanged and returned."""
        ...

    def finish(
        self,
        key: RunKey,
        result: RunResult,
        *,
        now: datetime,
        timers: Timers,
        from_states: Collection[str] | None = None,
    ) -> ClaimResult:
        """The terminal CAS along :data:`EDGES`, in ONE transaction with: the failure streak
        (:func:`alma_schedule.policies.streak.streak_effect` of the outcome and reason, with
        ``timers.streak_counts_refused``: +1, reset or untouched), the auto-pause latch at
        ``timers.failure_threshold`` (paused_reason ``failure_streak:<reason>`` unless already paused,
        ``next_due_at`` NULL), and the money settlement (spend rows moved from reserved to
        ``result.cost_micros`` or the recorded cost; the run's reservation cleared), and
        ``erase_at = now + timers.result_retention`` when result text is kept (and no ``erase_at``
        was annotated), and the release of the routine's buffered fire (``released``; its
        ``resend_at`` keeps the delay of its claim). :class:`InvalidInput` for a non-terminal
        outcome or an unknown reason code. A ``buffered`` row is never finished (no owner).

        ``from_states`` NARROWS the states the run may be finished from (None = every source of
        ``EDGES[result.outcome]``; never widens them): a caller finishes only from the state it owns
        (a collector that did not win ``begin_collecting`` passes ``{"submitted"}``). A row in any
        other state is a loser (``won=False``, ``duplicate``, the current record): nothing changes,
        neither the row, nor the streak, nor the money. :class:`InvalidInput` for a bare str or a
        state that is not non-terminal."""
        ...

    def record(
        self, key: RunKey, outcome: str, reason: str, *, now: datetime, cost_micros: int | None = None
    ) -> ClaimResult:
        """The operator's reconciliation (tenant): CAS from ANY non-terminal state (``buffered``
        too) to the terminal ``outcome``; SETTLES AT THE RECORDED COST: ``cost_micros`` when given
        (the run's cost becomes it), else the run's stored cost (an orphan that recorded nothing is
        released; an uncertain run stored its whole bound); never touches the streak; never
        resends; ending the open run releases the routine's buffered fire in the same transaction
        (``released``). :class:`InvalidInput` for a cost that is not integer micro-USD >= 0."""
        ...

    # --- the blocked marker (issue 14) ---

    def mark_blocked(self, key: RunKey, *, why: str, now: datetime, cost_micros: int | None = None) -> bool:
        """Mark a ``running`` run blocked AT ONCE (tenant key, ONE atomic statement): a
        compare-and-set on state ``running`` that never changes the state. Sets ``blocked_at = now``
        and ``blocked_why = why`` (one of :data:`~alma_schedule.model.BLOCKED_WHY`) unless the run
        is already marked (the first marker wins), and raises ``cost_micros`` to ``cost_micros``
        when that is higher (never lowers it; the reservation is untouched: ``record`` settles).
        True when the run is ``running`` and now carries the marker; False, with nothing written,
        for any other state or an unknown run. :class:`InvalidInput` for an unknown ``why`` or a
        bad cost. :meth:`blocked` and ``runs stuck`` list a marked run at once, whatever its age."""
        ...

    # --- end the blocked marker ---

    # --- the owner of a run (issue 14) ---

    def running_of(self, owner: str, limit: int = 1000) -> list[RunRecord]:
        """System, one read: the ``running`` runs Celery's request ``owner`` owns (their
        ``runs.owner`` is ``owner`` or starts with ``owner + "/"``: a packed ``run_many``), in key
        order. A partial index (``ix_runs_owner``, running rows only) serves it.
        :class:`InvalidInput` for an owner that :meth:`start` would refuse."""
        ...

    # --- end the owner of a run ---

    # ------------------------------------------------------------------ money

    def reserve(self, key: RunKey, day: str, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveResult:
        """Atomic: a conditional upsert per ceiling row of ``day`` (never exceeding its limit under
        concurrency) plus the run row's ``reserved_micros``/``reserve_day``/``reserve_ceilings``.
        All or nothing: ``ok=False`` names the first ceiling that would be exceeded. Only a running
        run that holds no reservation may reserve (else ``ok=False``, ``ceiling`` None);
        :class:`NotFound` for an unknown run."""
        ...

    def release(self, key: RunKey) -> RunRecord | None:
        """Give back the run's whole reservation (atomic)."""
        ...

    def spend(self, ceiling_key: str, day: str) -> int:
        """Reserved plus settled micro-USD of one ceiling on one day (system read)."""
        ...

    # ------------------------------------------------------------------ backfills

    def put_backfill(self, backfill: Backfill, *, now: datetime) -> Backfill:
        """Tenant, atomic: lock the routine row, then insert (or replace a done or cancelled)
        backfill row of that routine with ``created_at = now``. :class:`NotFound` for an unknown or
        deleted routine; :class:`BackfillRefused` (``paused``/``disabled``) while inactive, and
        (``pending``) while the routine has a pending backfill. The range itself was checked by the
        engine; nothing is written on a refusal."""
        ...

    def get_backfill(self, scope: Scope, routine_id: str) -> Backfill | None:
        """The routine's backfill row, pending or not (tenant read)."""
        ...

    def cancel_backfill(
        self, scope: Scope, routine_id: str, *, now: datetime
    ) -> tuple[Backfill | None, RunRecord | None]:
        """Tenant, atomic: ``cancelled_at = now`` on the routine's PENDING backfill, and its
        ``claimed`` backfill run (if any) -> ``skipped(operator)`` by compare-and-set (a run
        already started is left to finish). Returns (the backfill row after, the skipped run);
        (None, None) when there is no backfill; a repeat changes nothing."""
        ...

    def claim_backfills(self, now: datetime, limit: int, plan: PlanBackfill, timers: Timers) -> list[RunRecord]:
        """System, its own statements (a tick calls it AFTER its ``claim_due`` batches: live fires
        first). With no pending backfill: ONE read and nothing else. Otherwise ONE transaction:
        lock (skip-locked) up to ``limit`` routines with a pending backfill that are live, enabled,
        unpaused, not due (``next_due_at`` NULL or ``> now``) and have NO non-terminal run; call
        ``plan`` once per routine (None or an exception: leave it); insert, per routine, at most
        ONE ``claimed`` run of origin ``backfill`` (run id = the fire id): the first candidate of
        the step with no run row (``expires_at``/``resend_at`` from the step); move ``next_at``
        past the claimed fire (NULL when it was the last one of an exhausted step), or past every
        candidate when all had rows. A backfill row's ``due_at`` is its ``fire_at`` (no jitter).
        Returns the claimed rows."""
        ...

    # ------------------------------------------------------------------ reads

    def get(self, key: RunKey) -> RunRecord | None:
        """One run (tenant)."""
        ...

    def list_runs(
        self,
        scope: Scope,
        *,
        routine_id: str | None = None,
        state: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        before: tuple[datetime, str] | None = None,
    ) -> list[RunRecord]:
        """The ledger of a scope, newest first by ``(fire_at, run_id)``; ``before`` pages (tenant)."""
        ...

    def last_completed_delivery(self, scope: Scope, routine_id: str) -> RunRecord | None:
        """The latest ``completed(delivered)`` run with a delivery hash (tenant)."""
        ...

    def erase_results(self, scope: Scope) -> int:
        """Erase the result text of a scope's runs (tenant). Returns the count."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class RenamedMethods:
    """0.1.0's store method names, kept as deprecated aliases for one release (both backends)."""

    def beat(self, now: datetime) -> None:
        """Deprecated (removed in 0.3.0): :meth:`Store.heartbeat` (``beat`` read like the Celery-beat importer)."""
        import warnings

        message = "Store.beat is deprecated (removed in 0.3.0): use Store.heartbeat"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        self.heartbeat(now)  # type: ignore[attr-defined]
