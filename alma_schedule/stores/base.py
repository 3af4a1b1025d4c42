"""The storage protocol every backend implements (:class:`Store`): each method is ONE transaction unless
its docstring says otherwise; datetimes are aware UTC, money integer micro-USD; guarded transitions are
compare-and-set returning :class:`ClaimResult`; bad input raises :class:`InvalidInput`, writing nothing.
docs/architecture.md, section "The modules, in detail" (stores/base.py).
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
from alma_schedule.model.events import RoutineEvent
from alma_schedule.settings import Timers
from alma_schedule.stores.calendars import CalendarStore
from alma_schedule.stores.fleet import FleetStore
from alma_schedule.stores.overdue import OverdueStore
from alma_schedule.stores.system import Derive as Derive
from alma_schedule.stores.system import SystemStore

Decide = Callable[[Routine], Decision]
PlanBackfill = Callable[[Routine, Backfill], BackfillStep | None]


@runtime_checkable
class Store(SystemStore, CalendarStore, OverdueStore, FleetStore, Protocol):
    # ------------------------------------------------------------------ routines (tenant)

    def put_routine(
        self, routine: Routine, *, now: datetime, expected_revision: str | None = None, actor: str | None = None
    ) -> Routine:
        """Register or re-register (tenant, atomic): insert, or replace the registered fields of the live row.
        Every write of this section (and ``claim_manual``, ``record``, ``put_backfill``,
        ``cancel_backfill``) appends its audit event (:mod:`alma_schedule.policies.audit`, by ``actor``)
        in the SAME transaction when it changed something; a bad ``actor`` is :class:`InvalidInput`.
        ``expected_revision`` is a CAS on the current revision (mismatch: :class:`StoreConflict`); a tombstoned
        id with an open run raises :class:`RegistrationRefused`; a new revision appends a :class:`RoutineVersion`.
        docs/architecture.md, section "The modules, in detail" (stores/base.py).
        """
        ...

    def put_routines(
        self, routines: Sequence[tuple[Routine, str | None]], *, now: datetime, actor: str | None = None
    ) -> list[Routine]:
        """Many registrations, each pair ``(routine, expected_revision)`` as :meth:`put_routine`'s, in
        ONE transaction (tenant): all are written, or none (the first :class:`StoreConflict` or
        :class:`RegistrationRefused` raised; a routine given twice: :class:`InvalidInput`). Returns
        the stored rows in the given order."""
        ...

    def set_enabled(
        self,
        scope: Scope,
        routine_id: str,
        enabled: bool,
        *,
        now: datetime,
        next_due_at: datetime | None,
        reason: str | None = None,
        actor: str | None = None,
    ) -> Routine:
        """Disable (``next_due_at`` NULL, ``disabled_reason = reason``) or enable (restart: ``last_fire
        = now``, streak 0, the given ``next_due_at`` unless paused; the reason cleared). Tenant, atomic.
        :class:`NotFound` for unknown or deleted ids. Already in the requested state: a no-op (the row
        is returned unchanged, its reason too). A reason with ``enabled=True``: :class:`InvalidInput`."""
        ...

    def set_paused(
        self,
        scope: Scope,
        routine_id: str,
        reason: str | None,
        *,
        now: datetime,
        next_due_at: datetime | None,
        actor: str | None = None,
    ) -> Routine:
        """Pause with ``reason`` (``next_due_at`` NULL; an existing reason is KEPT: the first wins),
        or resume with None (reason cleared, streak 0, ``last_fire = now``, the given ``next_due_at``
        unless disabled). Tenant, atomic. :class:`NotFound` for unknown or deleted ids. Resuming a
        routine that is not paused is a no-op."""
        ...

    def delete_routine(self, scope: Scope, routine_id: str, *, now: datetime, actor: str | None = None) -> Routine:
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

    # --- the audit trail ---

    def routine_events(self, scope: Scope, routine_id: str, *, limit: int = 100) -> list[RoutineEvent]:
        """The routine's audit trail newest first by ``(at, event_id)`` (tenant read); the events of a
        purged routine stay until the retention prunes them."""
        ...

    def prune_events(self, before: datetime, limit: int) -> int:
        """System, ONE statement: delete up to ``limit`` audit events older than ``before``, oldest
        first. Returns the count."""
        ...

    # --- end the audit trail ---

    # ------------------------------------------------------------------ the tick (system)

    def claim_due(self, now: datetime, limit: int, decide: Decide, timers: Timers) -> ClaimBatch:
        """System, ONE transaction, a constant number of statements per batch: lock up to ``limit`` due,
        undeferred routines (skip-locked, oldest first), ``decide`` each, and write the answer (cursor move,
        run row claimed/skipped/buffered, deferral) atomically. Returns the :class:`ClaimBatch`.
        docs/architecture.md, section "The modules, in detail" (stores/base.py).
        """
        ...

    def claim_manual(
        self, key: RunKey, *, now: datetime, expires_at: datetime, resend_at: datetime, actor: str | None = None
    ) -> ClaimResult:
        """Tenant, atomic: lock the routine row, then insert a ``claimed`` manual run.

        Refused (``won=False``) with reason ``deleted``/``disabled``/``paused`` (record None), with
        ``overlap`` and the blocking record while the routine has any non-terminal run, or
        ``not_found``. Never moves the cursor. The row's ``fire_at`` and ``due_at`` are ``now``.
        """
        ...

    def take_resends(self, now: datetime, limit: int, timers: Timers, *, send: bool = True) -> Resends:
        """System, atomic: expire ``claimed``/``buffered`` rows past ``expires_at`` (always), then, if ``send``,
        take up to ``limit`` ``claimed`` rows with ``resend_at <= now`` (skip-locked), bumping ``send_attempts``
        and ``resend_at`` in the same statement: concurrent callers take each row once.
        docs/architecture.md, section "The modules, in detail" (stores/base.py).
        """
        ...

    def take_polls(self, now: datetime, limit: int, timers: Timers) -> list[RunRecord]:
        """System, atomic: up to ``limit`` ``submitted`` rows with ``next_poll_at <= now`` (skip-locked),
        ``poll_attempts`` bumped and ``next_poll_at`` pushed by ``backoff(poll_first, poll_max, attempts)``."""
        ...

    # ------------------------------------------------------------------ run transitions

    def start(self, key: RunKey, *, now: datetime, owner: str | None = None, in_window: bool = False) -> ClaimResult:
        """CAS ``claimed -> running`` in one statement, writing ``owner``; an inactive routine or a start past
        ``max_runs`` skips the run instead, atomically with the release of its buffered fire. Returns
        :class:`ClaimResult` (a loser: ``superseded``, ``duplicate``, ``expired`` or ``not_found``, never raises).
        docs/architecture.md, section "The modules, in detail" (stores/base.py).
        """
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
        """The terminal CAS along :data:`EDGES`, in ONE transaction with the failure streak, the auto-pause
        latch, the money settlement, ``erase_at`` and the release of the buffered fire. ``from_states`` only
        narrows the allowed sources; a loser changes nothing. :class:`InvalidInput` for a non-terminal outcome.
        docs/architecture.md, section "The modules, in detail" (stores/base.py).
        """
        ...

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
        """The operator's reconciliation (tenant, atomic): CAS from ANY non-terminal state to ``outcome``,
        settling at the recorded cost; never touches the streak, never resends; releases the buffered fire
        in the same transaction. :class:`InvalidInput` for a cost that is not integer micro-USD >= 0.
        docs/architecture.md, section "The modules, in detail" (stores/base.py).
        """
        ...

    # --- the blocked marker ---

    def mark_blocked(self, key: RunKey, *, why: str, now: datetime, cost_micros: int | None = None) -> bool:
        """Mark a ``running`` run blocked (tenant, ONE atomic statement; the state never changes): the first
        marker wins, ``cost_micros`` only rises. True when the run is ``running`` and carries the marker; False,
        nothing written, otherwise. :class:`InvalidInput` for an unknown ``why`` or a bad cost.
        docs/architecture.md, section "The modules, in detail" (stores/base.py).
        """
        ...

    # --- end the blocked marker ---

    # --- the owner of a run ---

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

    def put_backfill(self, backfill: Backfill, *, now: datetime, actor: str | None = None) -> Backfill:
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
        self, scope: Scope, routine_id: str, *, now: datetime, actor: str | None = None
    ) -> tuple[Backfill | None, RunRecord | None]:
        """Tenant, atomic: ``cancelled_at = now`` on the routine's PENDING backfill, and its
        ``claimed`` backfill run (if any) -> ``skipped(operator)`` by compare-and-set (a run
        already started is left to finish). Returns (the backfill row after, the skipped run);
        (None, None) when there is no backfill; a repeat changes nothing."""
        ...

    def claim_backfills(self, now: datetime, limit: int, plan: PlanBackfill, timers: Timers) -> list[RunRecord]:
        """System: with no pending backfill ONE read; else ONE transaction claiming, per eligible routine
        (skip-locked, up to ``limit``), at most one ``backfill`` run of ``plan``'s step and moving its
        ``next_at``. Returns the claimed rows.
        docs/architecture.md, section "The modules, in detail" (stores/base.py).
        """
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
        before: tuple[datetime, str] | tuple[datetime, str, str] | None = None,
    ) -> list[RunRecord]:
        """Tenant: the scope's ledger newest first by ``(fire_at, run_id, routine_id)``; ``before`` (that
        key of the last row shown; a ``(fire_at, run_id)`` pair: every row before it) pages."""
        ...

    def last_completed_delivery(self, scope: Scope, routine_id: str) -> RunRecord | None:
        """The latest ``completed(delivered)`` run with a delivery hash (tenant)."""
        ...

    def erase_results(self, scope: Scope) -> int:
        """Erase the result text of a scope's runs, and blank the payloads (``reason``, ``diff``) of
        its audit events, keeping who and when (tenant, atomic). Returns the count of runs."""
        ...

    # --- run retention ---

    def prune_runs(self, before: datetime, limit: int) -> int:
        """System, ONE transaction (the tick's retention of run history, ``run_retention``): delete at
        most ``limit`` TERMINAL runs whose ``finished_at`` is before ``before``, the oldest first (rows
        another transaction holds are skipped, left for a later call), and in the same transaction raise
        each touched routine's ``pruned_through`` (never lower it) to the latest ``fire_at`` of its
        deleted ``schedule``/``backfill`` rows, so a backfill never re-runs a pruned fire. A
        non-terminal run is never deleted. Returns how many runs were deleted."""
        ...

    # --- end run retention ---

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
