"""``backfill``: an operator's range of past fires, run one per tick, one run row per fire.

docs/architecture.md, section "The modules, in detail" (engine/backfill.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from alma_schedule.core import After, ScheduleValue, next_fire
from alma_schedule.core.fires import run_id_of
from alma_schedule.errors import BackfillRefused, InvalidInput, NotFound
from alma_schedule.model import Backfill, BackfillStep, Data, Routine, RunRecord, Scope, check_scope
from alma_schedule.policies.audit import check_actor

from .decide import schedule_of
from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["DEFAULT_MAX_FIRES", "BackfillPlanner", "BackfillReceipt", "backfill", "cancel_backfill", "range_fires"]

DEFAULT_MAX_FIRES = 1000
#: How far a refusal counts the fires of an over-long range (beyond: "more than").
COUNT_CAP = 100_000
#: Candidates handed to the store per routine per tick (fires that already have rows are passed over).
STEP = 16
SECOND = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class BackfillReceipt(Data):
    """What :func:`backfill` stored: the range, how many of its fires will run (no run row yet)
    and how many already have a row (never run again)."""

    backfill: Backfill
    fires: int
    already_run: int
    first: datetime
    last: datetime


def lower_bound(routine: Routine) -> datetime:
    """``max(registered_at, pruned_through)``: a backfilled fire is strictly after it."""
    pruned = routine.pruned_through
    return routine.registered_at if pruned is None or pruned < routine.registered_at else pruned


def range_fires(
    schedule: ScheduleValue, routine: Routine, start: datetime, end: datetime, limit: int
) -> list[datetime]:
    """Up to ``limit`` fires ``f`` of ``schedule`` with ``start <= f <= end`` and ``f`` after the
    routine's lower bound, in order."""
    floor = lower_bound(routine)
    cursor = max(start - SECOND, floor)
    out: list[datetime] = []
    while len(out) < limit:
        f = next_fire(schedule, routine.registered_at, cursor)
        if f is None or f > end:
            break
        if f >= start:
            out.append(f)
        cursor = f
    return out


def _instant(name: str, value: datetime) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(f"{name} must be an aware datetime (with an offset), got {value!r}")
    return value.astimezone(UTC)


def _count(schedule: ScheduleValue, routine: Routine, start: datetime, end: datetime) -> tuple[int, str]:
    """How many fires of the range lie inside the bounds (capped at :data:`COUNT_CAP` + 1), and as text."""
    n = len(range_fires(schedule, routine, start, end, COUNT_CAP + 1)) if start <= end else 0
    return n, (f"more than {COUNT_CAP}" if n > COUNT_CAP else str(n))


def _check_range(
    rt: Runtime, routine: Routine, start: datetime, end: datetime, max_fires: int, at: datetime
) -> list[datetime]:
    """The range's fires, or the refusal naming the bound it crosses and the count."""
    name = f"{routine.scope}/{routine.routine_id}"
    inactive = routine.inactive_reason
    if inactive is not None:
        raise BackfillRefused(f"routine {name} is {inactive}: resume it before a backfill", reason=inactive)
    schedule = schedule_of(routine)
    if isinstance(schedule, After):
        raise BackfillRefused(
            f"routine {name} has an 'after' schedule (a fixed delay): it has no nominal past instants to "
            "backfill; trigger a run instead",
            reason="after",
        )
    if end > at:
        n, text = _count(schedule, routine, start, min(at, routine.last_fire or at))
        raise BackfillRefused(
            f"--to {end.isoformat()} is in the future (now {at.isoformat()}); the range holds {text} "
            f"fires that could be backfilled",
            reason="future",
            bound=at,
            count=n,
        )
    floor = lower_bound(routine)
    if start <= floor:
        bound = (
            "pruned_through"
            if routine.pruned_through is not None and floor == routine.pruned_through
            else "registered_at"
        )
        n, text = _count(schedule, routine, start, end)
        raise BackfillRefused(
            f"--from {start.isoformat()} is not after the routine's {bound} {floor.isoformat()}; "
            f"the range holds {text} fires after it",
            reason=bound,
            bound=floor,
            count=n,
        )
    last = routine.last_fire
    if last is None or end > last:
        shown = last.isoformat() if last is not None else "none (no fire claimed yet)"
        n, text = _count(schedule, routine, start, last) if last is not None else (0, "0")
        raise BackfillRefused(
            f"--to {end.isoformat()} is after the routine's last_fire {shown}; the range holds {text} fires up to it",
            reason="last_fire",
            bound=last,
            count=n,
        )
    fires = range_fires(schedule, routine, start, end, max_fires + 1)
    if len(fires) > max_fires:
        n, text = _count(schedule, routine, start, end)
        raise BackfillRefused(
            f"the range holds {text} fires, over --max {max_fires}", reason="max", bound=max_fires, count=n
        )
    if not fires:
        raise BackfillRefused(
            f"the range {start.isoformat()}..{end.isoformat()} holds no fire of {name}", reason="empty", count=0
        )
    return fires


def _with_rows(rt: Runtime, routine: Routine, start: datetime, end: datetime) -> set[str]:
    """Run ids of the routine's rows with ``start <= fire_at <= end`` (the ledger, paged)."""
    ids: set[str] = set()
    before: tuple[datetime, str] | tuple[datetime, str, str] | None = (end + SECOND, "")
    while before is not None:
        page = rt.store.list_runs(routine.scope, routine_id=routine.routine_id, since=start, limit=1000, before=before)
        ids.update(r.run_id for r in page)
        before = (page[-1].fire_at, page[-1].run_id, page[-1].routine_id) if len(page) == 1000 else None
    return ids


def _live(rt: Runtime, scope: Scope, routine_id: str) -> Routine:
    routine = rt.store.get_routine(check_scope(scope), routine_id)
    if routine is None or routine.deleted_at is not None:
        raise NotFound.of("routine", f"{scope}/{routine_id}")
    return routine


def backfill(
    rt: Runtime,
    scope: Scope,
    routine_id: str,
    start: datetime,
    end: datetime,
    *,
    max_fires: int = DEFAULT_MAX_FIRES,
    now: datetime | None = None,
    actor: str | None = None,
) -> BackfillReceipt:
    """Check the range and store it for the ticks (see the module docstring). Tenant."""
    actor = check_actor(actor)
    at = rt.now(now)
    if isinstance(max_fires, bool) or not isinstance(max_fires, int) or max_fires < 1:
        raise InvalidInput(f"--max must be a positive integer, got {max_fires!r}")
    start, end = _instant("--from", start), _instant("--to", end)
    if start > end:
        raise InvalidInput(f"--from {start.isoformat()} is after --to {end.isoformat()}")
    routine = _live(rt, scope, routine_id)
    fires = _check_range(rt, routine, start, end, max_fires, at)
    taken = _with_rows(rt, routine, start, end)
    schedule = schedule_of(routine)
    todo = [f for f in fires if run_id_of(schedule, f) not in taken]  # a rolled fire's id: its nominal instant
    if not todo:
        raise BackfillRefused(f"every fire of the range ({len(fires)}) already has a run row", reason="empty", count=0)
    row = Backfill(routine.org, routine.uid, routine.routine_id, start, end, todo[0], max_fires)
    stored = rt.store.put_backfill(row, now=at, actor=actor)
    return BackfillReceipt(stored, len(todo), len(fires) - len(todo), todo[0], todo[-1])


def cancel_backfill(
    rt: Runtime, scope: Scope, routine_id: str, *, now: datetime | None = None, actor: str | None = None
) -> tuple[Backfill, RunRecord | None]:
    """Cancel the routine's backfill; its ``claimed`` run becomes ``skipped(operator)``. Tenant."""
    actor = check_actor(actor)
    at = rt.now(now)
    _live(rt, scope, routine_id)
    row, skipped = rt.store.cancel_backfill(scope, routine_id, now=at, actor=actor)
    if row is None:
        raise NotFound.of("backfill", f"{scope}/{routine_id}")
    return row, skipped


@dataclass(frozen=True, slots=True)
class BackfillPlanner:
    """The tick's plan for one routine's backfill: the next :data:`STEP` fires of the range inside
    the bounds, from ``next_at``. Never raises: a routine it cannot plan is left for a later tick
    (``claim_due`` reports and backs off a bad schedule)."""

    runtime: Runtime
    now: datetime

    def __call__(self, routine: Routine, row: Backfill) -> BackfillStep | None:
        if row.next_at is None:
            return None
        try:
            schedule = schedule_of(routine)
            last = routine.last_fire or routine.registered_at
            end = min(row.to_at, last)
            fires = range_fires(schedule, routine, max(row.next_at, row.from_at), end, STEP + 1)
        except Exception as exc:
            log.warning("backfill of %s cannot be planned: %s", routine.key, type(exc).__name__, exc_info=exc)
            return None
        s = self.runtime.settings
        return BackfillStep(
            tuple((run_id_of(schedule, f), f) for f in fires[:STEP]),
            expires_at=self.now + s.one_shot_window,
            resend_at=self.now + s.resend_first,
            exhausted=len(fires) <= STEP,
        )
