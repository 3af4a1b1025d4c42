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
        """System (crosses every scope; never exposed per tenant): live routines in key order,
        ``after`` a key for paging, filtered by ``kind`` and by ``state``, one of
        :data:`~alma_schedule.model.ROUTINE_STATES`: ``enabled`` (enabled, unpaused, with a next
        fire), ``paused``, ``disabled``, ``finished`` (enabled, unpaused, no next fire: the
        schedule is exhausted) or ``erroring`` (carries a planning error). ONE query.
        :class:`InvalidInput` for another state."""
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

    def iter_routines(self, batch: int = 1000) -> Iterator[Routine]:
        """System: every routine, streamed in key order (never all loaded at once)."""
        ...

    def probe_tick(self, now: datetime, run_time_limit: timedelta) -> TickProbe:
        """System, read-only, ONE statement: for each step of a tick at ``now``, whether it has
        anything to do. Each flag is true exactly when its step's own selection is non-empty:
        ``due`` (``claim_due`` would lock a routine), ``backfills`` (a backfill is pending),
        ``resends`` / ``expiries`` (``take_resends`` would take / expire a run), ``polls``
        (``take_polls`` would take a run), ``expired_results`` (``erase_expired_results`` would
        erase a text), ``purge`` (``purge_deleted`` would remove a routine), ``blocked``
        (``blocked(now, run_time_limit)`` would list a run), ``erroring`` (``erroring`` would list a
        routine). One snapshot per flag at most (advisory: a row may become eligible just after)."""
        ...

    # ------------------------------------------------------------------ maintenance (system)

    def heartbeat(self, now: datetime) -> datetime | None:
        """Record the heartbeat and the wake-up hint in ONE atomic statement, and return the hint.

        ``last_tick`` = ``now`` unless it is already later (it never moves backwards). The hint
        (``next_wake_at``) is the earliest instant strictly after ``now`` among the routines'
        ``next_due_at`` (and ``defer_until`` of those that carry a planning error), the claimed
        runs' ``resend_at`` and ``expires_at`` and the submitted runs' ``next_poll_at``; None when
        nothing is ever due. Advisory: it misses registrations made after it was computed."""
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

    # --- the tick log (issue 17) ---
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
        """System: START the end of a tick (``ask``: :meth:`record_tick`, and :meth:`erroring` and
        :meth:`blocked` when asked) so that it runs while the caller does other work (the tick's last
        sends); the context's value, called once inside it, returns the parts obtained (never
        raises: a part that failed is None and so is every part not started). The caller asks for a
        missing part with the part's own method, so each part keeps that method's atomicity and
        errors. A store that cannot start work early obtains nothing (memory, SQLite: every part
        None, asked after the sends, as before). PostgreSQL: the parts are sent at once, pipelined
        on one connection, and their answers read when the value is called (ONE round trip; the
        implicit transaction of the pipeline commits ``record_tick``'s write at that read:
        :mod:`alma_schedule.stores.sql.store_ticklog`)."""
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
        """System, ONE transaction holding the one ``zone_state`` row (one reconciler at a time).

        When the store already records ``zone_data`` (what every routine's next fire was derived
        under): nothing (``done``). Otherwise the next page of at most ``limit`` routines after the
        recorded cursor, in key order: each active one gets ``next_due_at = derive(routine)``, each
        ``tzdata_version = zone_data``; the cursor moves to the page's last key; the page that ends
        the walk records ``zone_data`` and clears the cursor (``done``). Bounded work per call, so a
        tick can take one page and the walk survives restarts."""
        ...

    def reindex(self, derive: Derive, *, tzdata_version: str | None = None, batch: int = 1000) -> int:
        """Re-derive ``next_due_at`` of every active routine with ``derive`` (system), streamed in
        batches, each batch one transaction. Returns how many changed."""
        ...
