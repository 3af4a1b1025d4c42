"""A backfill step: which candidate fire a tick claims, and where the range's ``next_at`` moves.

docs/architecture.md, section "The modules, in detail" (policies/backfill.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

from alma_schedule.model import BackfillStep

__all__ = ["FIRE_ORIGINS", "SECOND", "next_at", "pick", "raised_pruned_through", "ready_at"]

SECOND = timedelta(seconds=1)
#: The origins whose rows occupy a fire of the schedule (their run id is the fire id).
FIRE_ORIGINS: frozenset[str] = frozenset({"schedule", "backfill"})


def pick(step: BackfillStep, existing: Collection[str]) -> int | None:
    """The index of the first candidate whose run id is not in ``existing``, or None."""
    for i, (run_id, _) in enumerate(step.candidates):
        if run_id not in existing:
            return i
    return None


def next_at(step: BackfillStep, chosen: int | None) -> datetime | None:
    """The range's ``next_at`` after this step (None: the range is done)."""
    if not step.candidates:
        return None
    if chosen is None:
        return None if step.exhausted else step.candidates[-1][1] + SECOND
    if step.exhausted and chosen == len(step.candidates) - 1:
        return None
    return step.candidates[chosen][1] + SECOND


def raised_pruned_through(current: datetime | None, fires: Iterable[datetime]) -> datetime | None:
    """``pruned_through`` after deleting rows with these fire instants: the max, never lowered."""
    out = current
    for f in fires:
        if out is None or f > out:
            out = f
    return out


def ready_at(created_at: datetime | None, last_end: datetime | None) -> datetime | None:
    """When a pending backfill's next claim became possible: the later of its ``created_at`` and
    ``last_end``, the ``finished_at`` of its routine's latest backfill run below ``next_at`` (None
    while that run is open: its own re-send and expiry are in the hint). A tick that ran after this
    instant claimed what it could, so the hint, always strictly after the last tick, wakes once."""
    known = [at for at in (created_at, last_end) if at is not None]
    return max(known, default=None)
