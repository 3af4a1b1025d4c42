"""``Scheduler``: the engine's one public object, and the levers.

docs/architecture.md, section "The modules, in detail" (engine/scheduler.py).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable
from datetime import datetime

from alma_schedule.core import policy_of
from alma_schedule.core.zones import zone_data
from alma_schedule.errors import Finished, InvalidInput, NotFound, Overlap, Refused
from alma_schedule.model import (
    Backfill,
    ClaimResult,
    Dispatcher,
    Fire,
    NotDue,
    Reason,
    Routine,
    RoutineSpec,
    RoutineVersion,
    RunKey,
    RunRecord,
    Scope,
    TickPlan,
    TickReport,
    check_scope,
    manual_run_id,
)
from alma_schedule.model.events import RoutineEvent
from alma_schedule.policies import finished
from alma_schedule.policies.audit import check_actor
from alma_schedule.settings import Settings, Timers
from alma_schedule.stores.base import Store

from . import backfill as _backfill
from . import describe as _describe
from . import execute as _execute
from . import lost as _lost
from . import tick as _tick
from .decide import decide as _decide
from .dispatch import InProcessDispatcher
from .lost import LostReport
from .register import Prepared, RegisterMode, RegistrationReceipt, prepare, rederived_due, register, restart_due
from .runtime import RunnerSource, Runtime, as_resolver

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Scheduler", "create_schedule", "create_scheduler"]


def create_scheduler(
    *,
    store: Store,
    runner: RunnerSource,
    dispatcher: Dispatcher | None = None,
    settings: Settings | None = None,
) -> Scheduler:
    """Build the engine over ``store``.

    docs/architecture.md, "The modules, in detail" (engine/scheduler.py, create_scheduler).
    """
    s = settings if settings is not None else Settings()
    disp: Dispatcher = dispatcher if dispatcher is not None else InProcessDispatcher()
    schedule = Scheduler(
        Runtime(
            store=store,
            settings=s,
            timers=Timers.from_settings(s),
            resolver=as_resolver(runner),
            dispatcher=disp,
        )
    )
    if isinstance(disp, InProcessDispatcher) and not disp.bound:
        disp.bind(schedule)
    return schedule


#: The name since 0.1.0, kept: the same function as :func:`create_scheduler`.
create_schedule = create_scheduler


class Scheduler:
    """The engine. Build with :func:`create_scheduler`. Thread-safe (it keeps no state of its own)."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    @property
    def store(self) -> Store:
        return self._rt.store

    @property
    def settings(self) -> Settings:
        return self._rt.settings

    @property
    def timers(self) -> Timers:
        return self._rt.timers

    @property
    def dispatcher(self) -> Dispatcher:
        return self._rt.dispatcher

    def now(self, now: datetime | None = None) -> datetime:
        """The instant a writing call given ``now`` acts at (the clamp)."""
        return self._rt.now(now)

    # ------------------------------------------------------------------ registration

    def register(
        self,
        spec: RoutineSpec,
        *,
        now: datetime | None = None,
        mode: RegisterMode = "upsert",
        actor: str | None = None,
    ) -> RegistrationReceipt:
        """Register or re-register a routine (an upsert; ``mode`` ``"create"`` / ``"update"`` narrows
        it: see :mod:`alma_schedule.engine.register`). Every writing call takes ``actor``: who its
        audit event names (:meth:`history`; None: unrecorded)."""
        return register(self._rt, spec, now, mode=mode, actor=actor)

    def prepare(self, spec: RoutineSpec, *, now: datetime | None = None, mode: RegisterMode = "upsert") -> Prepared:
        """``register``'s checks and the row it would write, nothing written (an importer writes many
        such rows in one transaction with ``store.put_routines``)."""
        return prepare(self._rt, spec, now, mode=mode)

    # ------------------------------------------------------------------ levers (tenant)

    def _live(self, scope: Scope, routine_id: str) -> Routine:
        routine = self._rt.store.get_routine(scope, routine_id)
        if routine is None or routine.deleted_at is not None:
            raise NotFound.of("routine", f"{scope}/{routine_id}")
        return routine

    def disable(
        self, scope: Scope, routine_id: str, *, now: datetime | None = None, actor: str | None = None
    ) -> Routine:
        """The owner's off switch: ``enabled = False``, ``next_due_at`` NULL."""
        actor = check_actor(actor)
        self._live(scope, routine_id)
        store = self._rt.store
        return store.set_enabled(scope, routine_id, False, now=self._rt.now(now), next_due_at=None, actor=actor)

    def enable(
        self, scope: Scope, routine_id: str, *, now: datetime | None = None, actor: str | None = None
    ) -> Routine:
        """Switch back on: the cursor restarts at now and the streak resets (nothing missed fires)."""
        actor = check_actor(actor)
        at = self._rt.now(now)
        routine = self._live(scope, routine_id)
        due = restart_due(routine, at)
        return self._rt.store.set_enabled(scope, routine_id, True, now=at, next_due_at=due, actor=actor)

    def pause(
        self,
        scope: Scope,
        routine_id: str,
        reason: str = "manual",
        *,
        now: datetime | None = None,
        actor: str | None = None,
    ) -> Routine:
        """Latch a pause (the first reason is kept); ``next_due_at`` NULL."""
        actor = check_actor(actor)
        self._live(scope, routine_id)
        store = self._rt.store
        return store.set_paused(scope, routine_id, reason, now=self._rt.now(now), next_due_at=None, actor=actor)

    def resume(
        self, scope: Scope, routine_id: str, *, now: datetime | None = None, actor: str | None = None
    ) -> Routine:
        """Clear the pause: the cursor restarts at now and the streak resets (nothing missed fires)."""
        actor = check_actor(actor)
        at = self._rt.now(now)
        routine = self._live(scope, routine_id)
        due = restart_due(routine, at)
        return self._rt.store.set_paused(scope, routine_id, None, now=at, next_due_at=due, actor=actor)

    def delete(
        self, scope: Scope, routine_id: str, *, now: datetime | None = None, actor: str | None = None
    ) -> Routine:
        """Tombstone the routine (idempotent); its runs stay in the ledger until purged."""
        return self._rt.store.delete_routine(scope, routine_id, now=self._rt.now(now), actor=check_actor(actor))

    def trigger(
        self, scope: Scope, routine_id: str, *, now: datetime | None = None, actor: str | None = None
    ) -> RunRecord:
        """Claim a ``manual:<ULID>`` run and dispatch it. Never moves the cursor, never silently dropped."""
        actor = check_actor(actor)
        at = self._rt.now(now)
        s = self._rt.settings
        key = RunKey.of(check_scope(scope), routine_id, manual_run_id(int(at.timestamp() * 1000)))
        self._refuse_finished(scope, routine_id, at)
        res = self._rt.store.claim_manual(
            key,
            now=at,
            expires_at=at + s.one_shot_window,
            resend_at=at + s.resend_first,
            actor=actor,
        )
        if not res.won:
            self._refuse(scope, routine_id, res)
        assert res.record is not None
        try:
            self._rt.dispatcher.send_runs([res.record])
        except Exception as exc:  # the row stays claimed: a later tick re-sends it
            log.error("trigger %s: dispatch failed (%s); a tick will re-send", res.record.key, type(exc).__name__)
        return res.record

    def _refuse_finished(self, scope: Scope, routine_id: str, at: datetime) -> None:
        """A trigger past the routine's ``not_after`` is refused (:class:`Finished`); a routine that is
        finished otherwise (``max_runs``, an exhausted schedule) may still be run by hand."""
        routine = self._rt.store.get_routine(scope, routine_id)
        if routine is not None and finished.finished_reason(routine, at) == finished.NOT_AFTER:
            bound = policy_of(routine.schedule).not_after
            when = bound.isoformat() if bound is not None else "?"
            raise Finished(f"routine {scope}/{routine_id} is finished: past its not_after ({when})")

    @staticmethod
    def _refuse(scope: Scope, routine_id: str, res: ClaimResult) -> None:
        name = f"{scope}/{routine_id}"
        if res.reason == "overlap":
            blocking = res.record
            what = f" by run {blocking.run_id} ({blocking.state})" if blocking is not None else ""
            raise Overlap(f"routine {name} is busy{what}", record=blocking)
        if res.reason in (Reason.PAUSED, Reason.DISABLED, Reason.DELETED):
            raise Refused(f"routine {name} is {res.reason}", reason=res.reason, record=res.record)
        raise NotFound.of("routine", name)

    def backfill(
        self,
        scope: Scope,
        routine_id: str,
        start: datetime,
        end: datetime,
        *,
        max_fires: int = _backfill.DEFAULT_MAX_FIRES,
        now: datetime | None = None,
        actor: str | None = None,
    ) -> _backfill.BackfillReceipt:
        """Run the past fires ``start <= f <= end`` that have no run row, one per tick (see
        :mod:`.backfill`: the bounds, the refusals, how the runs behave). Tenant."""
        return _backfill.backfill(self._rt, scope, routine_id, start, end, max_fires=max_fires, now=now, actor=actor)

    def cancel_backfill(
        self, scope: Scope, routine_id: str, *, now: datetime | None = None, actor: str | None = None
    ) -> tuple[Backfill, RunRecord | None]:
        """Cancel the routine's backfill; its ``claimed`` run becomes ``skipped(operator)``. Tenant."""
        return _backfill.cancel_backfill(self._rt, scope, routine_id, now=now, actor=actor)

    # ------------------------------------------------------------------ reads (tenant)

    def get(self, scope: Scope, routine_id: str) -> Routine:
        """One live routine of the scope (:class:`NotFound` if unknown or deleted)."""
        return self._live(scope, routine_id)

    def routines(
        self, scope: Scope, *, include_deleted: bool = False, limit: int = 1000, after: str | None = None
    ) -> builtins.list[Routine]:
        """The scope's routines, ordered by id (``after`` pages)."""
        return self._rt.store.list_routines(scope, include_deleted=include_deleted, limit=limit, after=after)

    def list(
        self, scope: Scope, *, include_deleted: bool = False, limit: int = 1000, after: str | None = None
    ) -> builtins.list[Routine]:
        """Deprecated (removed in 0.3.0; it shadowed the builtin): :meth:`routines`."""
        import warnings

        message = "Scheduler.list is deprecated (removed in 0.3.0): use Scheduler.routines"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return self.routines(scope, include_deleted=include_deleted, limit=limit, after=after)

    def describe(
        self, scope: Scope, routine_id: str, *, now: datetime | None = None, fires: int = 5, runs: int = 10
    ) -> _describe.RoutineView:
        """One routine in one view: schedule, policies, state, next fires, last runs, the blocking
        or buffered run, a pending backfill (see :mod:`.describe`). Reads only."""
        return _describe.describe(self._rt, scope, routine_id, now=now, fires=fires, runs=runs)

    def versions(self, scope: Scope, routine_id: str) -> builtins.list[RoutineVersion]:
        """A routine's immutable version history, oldest first."""
        return self._rt.store.routine_versions(scope, routine_id)

    def history(self, scope: Scope, routine_id: str, *, limit: int = 100) -> builtins.list[RoutineEvent]:
        """A routine's audit trail, newest first: who changed it, when, how (a deleted, even purged,
        routine's too). Reads only."""
        return self._rt.store.routine_events(check_scope(scope), routine_id, limit=limit)

    def runs(
        self,
        scope: Scope,
        *,
        routine_id: str | None = None,
        state: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        before: tuple[datetime, str] | tuple[datetime, str, str] | None = None,
    ) -> builtins.list[RunRecord]:
        """The scope's ledger, newest first by ``(fire_at, run_id, routine_id)``; ``before``: the
        last row's three (see ``Store.list_runs``)."""
        return self._rt.store.list_runs(
            scope, routine_id=routine_id, state=state, since=since, limit=limit, before=before
        )

    def run(self, scope: Scope, routine_id: str, run_id: str) -> RunRecord:
        """One run of the scope (:class:`NotFound` if none)."""
        record = self._rt.store.get(RunKey.of(check_scope(scope), routine_id, run_id))
        if record is None:
            raise NotFound.of("run", f"{scope}/{routine_id}/{run_id}")
        return record

    # ------------------------------------------------------------------ the tick's side (system)

    def decide(self, routine: Routine, *, now: datetime) -> Fire | NotDue:
        """The pure decision for one routine at ``now`` (for inspection; writes nothing)."""
        if not isinstance(routine, Routine):
            raise InvalidInput(f"decide takes a Routine, not {type(routine).__name__}")
        return _decide(routine, self._rt.peek_now(now), self._rt.settings)

    def plan(self, *, now: datetime | None = None) -> TickPlan:
        """What a tick at ``now`` would do, and why. Read-only; ``now`` may be any instant."""
        return _tick.plan(self._rt, now)

    def tick(self, *, now: datetime | None = None) -> TickReport:
        """Claim what is due, dispatch it, re-send, poll, maintain, report (see :mod:`.tick`)."""
        return _tick.tick(self._rt, now)

    def execute(
        self,
        key: RunKey,
        *,
        now: datetime | None = None,
        owner: str | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> RunRecord:
        """What a run message does: start once (writing ``owner``, the Celery request that runs it),
        run, finish (retried by the owner with ``sleep`` while the store is unreachable; see
        :mod:`.execute` and :mod:`.retry`)."""
        return _execute.execute(self._rt, key, now, owner, sleep)

    def report_lost(self, request_id: str, why: str, *, now: datetime | None = None) -> LostReport:
        """Celery reported the request ``request_id`` lost (``why``: ``worker_lost`` or
        ``time_limit``): settle or mark each of its ``running`` runs (see :mod:`.lost`)."""
        return _lost.report_lost(self._rt, request_id, why, now)

    def collect(
        self,
        key: RunKey,
        *,
        now: datetime | None = None,
        owner: str | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> RunRecord:
        """What a collect message does (``key.run_id`` is the ``collect_run_id``); ``owner`` / ``sleep``
        as for :meth:`execute` (the collecting CAS writes the owner; its finish is retried)."""
        return _execute.collect(self._rt, key, now, owner, sleep)

    def record(
        self,
        scope: Scope,
        routine_id: str,
        run_id: str,
        outcome: str,
        reason: str,
        *,
        now: datetime | None = None,
        cost_micros: int | None = None,
        actor: str | None = None,
    ) -> ClaimResult:
        """The operator's reconciliation: any non-terminal run to ``outcome(reason)``, settled AT the
        recorded cost: ``cost_micros`` (integer micro-USD, what the provider really billed) when
        given, else the run's stored cost (an uncertain run stored its whole bound); never resends."""
        return _execute.record(
            self._rt, scope, routine_id, run_id, outcome, reason, now, cost_micros=cost_micros, actor=actor
        )

    # ------------------------------------------------------------------ maintenance (system)

    def reindex(self) -> int:
        """Re-derive every active routine's ``next_due_at`` from its cursor and schedule (system), e.g.
        after a tzdata update. Streams in batches; returns how many changed. A routine whose schedule
        no longer parses is made due now, so the next tick reports it (and backs it off)."""
        return self._rt.store.reindex(rederived_due, tzdata_version=zone_data())
