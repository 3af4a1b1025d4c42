"""``describe``: one routine in one view, as plain data (the CLI prints it; a dashboard reuses it).

docs/architecture.md, section "The modules, in detail" (engine/describe.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alma_schedule.core import policy_of
from alma_schedule.core.interval import format_interval
from alma_schedule.errors import AlmaScheduleError, NotFound
from alma_schedule.model import Data, Routine, RunRecord, RunState, Scope, check_scope

from .calendars import install_from
from .runtime import Runtime
from .upcoming import upcoming_fires

__all__ = ["RecentRun", "RoutineView", "UpcomingFire", "describe"]

#: The non-terminal states in the order a blocking run is looked for (at most one exists).
_BLOCKING = (RunState.RUNNING, RunState.SUBMITTED, RunState.COLLECTING, RunState.CLAIMED)
#: A fire waiting for the active run (overlap ``latest``), when the store knows the state.
BUFFERED = "buffered"


@dataclass(frozen=True, slots=True)
class UpcomingFire(Data):
    """One next fire: when it comes due (UTC, its jitter applied), its local reading in ``zone``, a
    DST and jitter note if any, and ``fire``, the nominal instant (the run id)."""

    utc: datetime
    local: datetime
    zone: str
    note: str | None = None
    fire: datetime | None = None


@dataclass(frozen=True, slots=True)
class RecentRun(Data):
    """One run row as the view shows it; ``duration_s`` from start to finish (None while open);
    ``lag_s`` how late it started: start - ``due_at`` (a jittered fire's delay is not lag)."""

    run_id: str
    origin: str
    state: str
    reason: str | None
    fire_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_s: float | None
    due_at: datetime | None = None
    lag_s: float | None = None

    @classmethod
    def of(cls, r: RunRecord) -> RecentRun:
        took = None
        if r.started_at is not None and r.finished_at is not None:
            took = (r.finished_at - r.started_at).total_seconds()
        lag = r.lag
        due = r.due_at or r.fire_at
        lag_s = None if lag is None else lag.total_seconds()
        return cls(r.run_id, r.origin, r.state, r.reason, r.fire_at, r.started_at, r.finished_at, took, due, lag_s)


@dataclass(frozen=True, slots=True)
class RoutineView(Data):
    """Everything ``routines describe`` shows about one routine (``to_dict()``: JSON-ready)."""

    key: str
    kind: str
    schedule: Mapping[str, Any]
    policies: Mapping[str, Any]
    state: str
    erroring: bool
    paused_reason: str | None
    streak: int
    failure_threshold: int
    registered_at: datetime
    last_fire: datetime | None
    next_due_at: datetime | None
    pruned_through: datetime | None
    last_error: str | None
    defer_until: datetime | None
    next_fires: tuple[UpcomingFire, ...]
    notes: tuple[str, ...]
    recent_runs: tuple[RecentRun, ...]
    blocking: RecentRun | None
    buffered: RecentRun | None
    backfill: Mapping[str, Any] | None
    #: The fires claims collapsed (no run row; ``policies.missed``), and whether a claim's count
    #: reached its cap (a lower bound: shown ``10,000+``).
    fires_missed: int = 0
    fires_missed_capped: bool = False
    #: Provenance (``model.provenance``) and why a disabled routine is disabled.
    source: str | None = None
    source_entry: str | None = None
    disabled_reason: str | None = None


def _policies(routine: Routine) -> tuple[dict[str, Any], list[str]]:
    """Every policy with its value (defaults included) and the notes they call for."""
    p = policy_of(routine.schedule)
    shown: dict[str, Any] = {
        "overlap": p.overlap,
        "catch_up": format_interval(p.catch_up) if p.catch_up is not None else "until the next fire",
        "not_before": p.not_before,
        "not_after": p.not_after,
        "max_runs": p.max_runs,
        "jitter": format_interval(p.jitter) if p.jitter is not None else None,
    }
    notes = []
    if p.jitter is not None:
        notes.append(f"jitter: each fire may run up to {format_interval(p.jitter)} after its nominal instant")
    return shown, notes


def _fixed_delay(routine: Routine, at: datetime) -> tuple[list[UpcomingFire], list[str]]:
    """A fixed delay's one pending fire (:func:`upcoming_fires` reads it from ``next_due_at``), or
    what it waits for."""
    delay = str(routine.schedule.get("after"))
    if routine.inactive_reason is not None:
        return [], [f"{routine.inactive_reason}: its next fire is due {delay} after it is switched back on"]
    rows = upcoming_fires(routine, at, 1)
    if not rows:
        return [], [f"fixed delay: the next fire is due {delay} after its run ends (a run that never ends delays it)"]
    note = f"fixed delay: due {delay} after the previous run's end; the one after it, {delay} after this run ends"
    return [UpcomingFire(f.utc, f.local, f.zone, None, f.fire or f.utc) for f in rows], [note]


def _fires(routine: Routine, at: datetime, n: int) -> tuple[list[UpcomingFire], list[str]]:
    if "after" in routine.schedule:
        return _fixed_delay(routine, at)
    notes: list[str] = []
    if routine.inactive_reason is not None:
        notes.append(f"{routine.inactive_reason}: no fire runs until it is switched back on")
    try:
        rows = upcoming_fires(routine, at.replace(microsecond=0), n)
    except AlmaScheduleError as exc:
        return [], [*notes, f"the schedule cannot be previewed: {exc}"]
    p = policy_of(routine.schedule)
    if p.not_before is not None or p.not_after is not None:
        notes.append("fires outside not_before / not_after are left out")
    if not rows:
        notes.append("the schedule has no further fire")
    return [UpcomingFire(f.utc, f.local, f.zone, f.note, f.fire or f.utc) for f in rows], notes


def _blocking(rt: Runtime, routine: Routine) -> tuple[RecentRun | None, RecentRun | None]:
    """The routine's non-terminal run (at most one) and its buffered fire, if the state exists."""
    blocking = None
    for state in _BLOCKING:
        rows = rt.store.list_runs(routine.scope, routine_id=routine.routine_id, state=state, limit=1)
        if rows:
            blocking = RecentRun.of(rows[0])
            break
    buffered = None
    if BUFFERED in {s.value for s in RunState}:
        rows = rt.store.list_runs(routine.scope, routine_id=routine.routine_id, state=BUFFERED, limit=1)
        buffered = RecentRun.of(rows[0]) if rows else None
    return blocking, buffered


def describe(
    rt: Runtime, scope: Scope, routine_id: str, *, now: datetime | None = None, fires: int = 5, runs: int = 10
) -> RoutineView:
    """The view of one live routine of ``scope`` (:class:`NotFound` if unknown or deleted). Reads only."""
    at = rt.peek_now(now)
    routine = rt.store.get_routine(check_scope(scope), routine_id)
    if routine is None or routine.deleted_at is not None:
        raise NotFound.of("routine", f"{scope}/{routine_id}")
    policies, notes = _policies(routine)
    if "calendar" in routine.schedule:  # its business calendar, as the tick installs it
        install_from(rt.store)
    upcoming, fire_notes = _fires(routine, at, fires)
    recent = rt.store.list_runs(routine.scope, routine_id=routine.routine_id, limit=runs)
    blocking, buffered = _blocking(rt, routine)
    backfill = rt.store.get_backfill(routine.scope, routine.routine_id)
    states = routine.state_names
    timing = {k: v for k, v in routine.schedule.items() if k not in policies}
    return RoutineView(
        key=str(routine.key),
        kind=routine.kind,
        schedule=timing,
        policies=policies,
        state=states[0],
        erroring="erroring" in states,
        paused_reason=routine.paused_reason,
        streak=routine.consecutive_failures,
        failure_threshold=rt.settings.failure_threshold,
        registered_at=routine.registered_at,
        last_fire=routine.last_fire,
        next_due_at=routine.next_due_at,
        pruned_through=routine.pruned_through,
        last_error=routine.last_error,
        defer_until=routine.defer_until,
        next_fires=tuple(upcoming),
        notes=tuple(notes + fire_notes),
        recent_runs=tuple(RecentRun.of(r) for r in recent),
        blocking=blocking,
        buffered=buffered,
        backfill=None if backfill is None else {**backfill.to_dict(), "pending": backfill.pending},
        fires_missed=routine.fires_missed,
        fires_missed_capped=routine.fires_missed_capped,
        source=routine.source,
        source_entry=routine.source_entry,
        disabled_reason=routine.disabled_reason,
    )
