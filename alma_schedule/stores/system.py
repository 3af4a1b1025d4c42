"""The system half of the storage protocol: the tick's peeks, the operator's lists across every
scope, the heartbeat and its wake-up hint, and maintenance. :class:`~alma_schedule.stores.base.Store`
extends it; the conventions (one transaction per method, aware UTC, what "system" means) are stated
in :mod:`alma_schedule.stores.base`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Protocol

from alma_schedule.model import (
    Erroring,
    Resends,
    Routine,
    RunRecord,
    TickEndAsk,
    TickEndParts,
    TickMinute,
    TickProbe,
    ZoneReconciliation,
)

Derive = Callable[[Routine], datetime | None]


class SystemStore(Protocol):
    def peek_due(self, now: datetime, limit: int) -> list[Routine]:
        """System, read-only: what ``claim_due`` would lock."""
        ...

    def peek_resends(self, now: datetime, limit: int) -> Resends:
        """System, read-only: what ``take_resends`` would take and expire."""
        ...

    def peek_polls(self, now: datetime, limit: int) -> list[RunRecord]:
        """System, read-only: what ``take_polls`` would take."""
        ...

    def system_routines(
        self,
        *,
        kind: str | None = None,
        state: str | None = None,
        limit: int = 1000,
        after: tuple[str, str, str] | None = None,
    ) -> list[Routine]:
        """System, ONE query: live routines in key order, ``after`` a key for paging, filtered by ``kind``
        and ``state`` (one of :data:`~alma_schedule.model.ROUTINE_STATES`). :class:`InvalidInput` for
        another state.
        docs/architecture.md, section "The modules, in detail" (stores/system.py).
        """
        ...

    def system_routine_counts(self, *, kind: str | None = None, state: str | None = None) -> list[tuple[str, str, int]]:
        """System: ``(org, uid, count)`` of the live routines per scope under the filters of
        :meth:`system_routines`, in scope order. ONE grouped query."""
        ...

    def list_inactive(self, limit: int = 1000) -> list[Routine]:
        """System: paused or disabled (not deleted) routines."""
        ...

    def blocked(self, now: datetime, run_time_limit: timedelta, limit: int = 100) -> list[RunRecord]:
        """System: ``running`` runs marked blocked (:meth:`mark_blocked`, at once), runs
        ``running``/``collecting`` longer than ``2 * run_time_limit`` (since ``state_at``), or
        ``submitted`` past their deadline; oldest ``state_at`` first."""
        ...

    def stuck(self, now: datetime, older_than: timedelta, limit: int = 100) -> list[RunRecord]:
        """System: non-terminal runs (``claimed`` excluded) whose state was entered before ``now - older_than``."""
        ...

    def unstarted(self, now: datetime, older_than: timedelta, limit: int = 1) -> list[RunRecord]:
        """System: ``claimed`` runs (sent, no worker started them) claimed and due before
        ``now - older_than``, oldest first: nothing has consumed the run queue for that long."""
        ...

    def iter_routines(self, batch: int = 1000) -> Iterator[Routine]:
        """System: every routine, streamed in key order (never all loaded at once)."""
        ...

    def probe_tick(self, now: datetime, run_time_limit: timedelta) -> TickProbe:
        """System, read-only, ONE statement: for each step of a tick at ``now``, whether its own selection
        is non-empty (advisory: a row may become eligible just after).
        docs/architecture.md, section "The modules, in detail" (stores/system.py).
        """
        ...

    # ------------------------------------------------------------------ maintenance (system)

    def heartbeat(self, now: datetime) -> datetime | None:
        """Record the heartbeat and the wake-up hint in ONE atomic statement, and return the hint:
        the earliest instant strictly after ``now`` anything is due, None when nothing ever is.
        ``last_tick`` never moves backwards.
        docs/architecture.md, section "The modules, in detail" (stores/system.py).
        """
        ...

    def last_tick(self) -> datetime | None:
        """The heartbeat."""
        ...

    def next_wake_at(self) -> datetime | None:
        """System: the wake-up hint the last :meth:`heartbeat` stored."""
        ...

    def peek_wake(self, now: datetime) -> datetime | None:
        """System, read-only: the hint :meth:`heartbeat` would store at ``now`` (for ``plan``)."""
        ...

    def erroring(self, limit: int = 20) -> Erroring:
        """System, read-only: up to ``limit`` live routines that carry a planning error (their
        error, and ``until`` = their next attempt), earliest next attempt first, and how many there
        are in all; one statement, through the partial index of those routines."""
        ...

    # --- the tick log ---
    def log_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> None:
        """System, ONE transaction (one statement on PostgreSQL): upsert the row of ``now``'s minute
        in the tick log (``ticks`` + 1, ``claimed`` + ``claimed``, each lag the larger of the stored
        and the given one, None counting as nothing), and delete the rows of minutes older than
        ``now`` - ``TICK_LOG_KEEP_DAYS``, the oldest first, at most ``TICK_LOG_PRUNE_LIMIT`` (1,000)."""
        ...

    def record_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> datetime | None:
        """System, the end of a tick, ONE atomic step (ONE statement on PostgreSQL, ONE transaction on
        SQLite): :meth:`heartbeat` at ``now`` and :meth:`log_tick` of its ``claimed`` fires and lags,
        both or neither, with their arguments checked as theirs. Returns the wake-up hint, as
        :meth:`heartbeat`."""
        ...

    def begin_tick_end(self, ask: TickEndAsk) -> AbstractContextManager[Callable[[], TickEndParts]]:
        """System: START the end of a tick (the parts in ``ask``) so that it runs while the caller works on;
        the context's value, called once inside it, returns the parts obtained (never raises: a failed or
        unstarted part is None, and the caller asks for it with its own atomic method).
        docs/architecture.md, section "The modules, in detail" (stores/system.py).
        """
        ...

    def tick_log(self, limit: int = 60) -> list[TickMinute]:
        """System, read-only: the ``limit`` newest minutes of the tick log, newest first."""
        ...

    def count_routines(self, cap: int = 10_000) -> dict[str, int]:
        """System, read-only, ONE statement: live (not deleted) routines by state, ``enabled``
        (enabled and not paused), ``paused`` (enabled and paused) and ``disabled``, each counted
        up to ``cap + 1`` rows (a count above ``cap`` reads "more than cap"; no full count)."""
        ...

    # --- end the tick log ---

    def prune(self, before: datetime) -> int:
        """Delete TERMINAL runs finished before ``before`` (system, ONE transaction). In the same
        transaction each routine's ``pruned_through`` is raised (never lowered) to the latest
        ``fire_at`` of its deleted ``schedule``/``backfill`` rows, so a backfill can never reach a
        fire whose row is gone. Returns the count."""
        ...

    def purge_deleted(self, limit: int = 1000) -> int:
        """Remove tombstoned routines (and their runs and versions) that have no non-terminal run."""
        ...

    def erase_expired_results(self, now: datetime, limit: int = 1000) -> int:
        """Erase the result text of runs whose ``erase_at <= now`` and clear that ``erase_at``
        (system; a run marked with no text has only its mark cleared). Returns how many runs."""
        ...

    def reconcile_zone_data(self, derive: Derive, zone_data: str, *, limit: int = 1000) -> ZoneReconciliation:
        """System, ONE transaction holding the ``zone_state`` row: re-derive ``next_due_at`` for the next
        page of at most ``limit`` routines under ``zone_data``; ``done`` once the walk is recorded.
        docs/architecture.md, section "The modules, in detail" (stores/system.py).
        """
        ...

    def reindex(self, derive: Derive, *, tzdata_version: str | None = None, batch: int = 1000) -> int:
        """Re-derive ``next_due_at`` of every active routine with ``derive`` (system), streamed in
        batches, each batch one transaction. Returns how many changed."""
        ...
