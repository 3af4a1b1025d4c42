"""A backfill step: which candidate fire a tick claims, and where the range's ``next_at`` moves.

The engine hands the store a :class:`~alma_schedule.model.BackfillStep` (the next candidate fires
of the range, in order); the store knows which of them already have a run row. The rule:

* the claimed fire is the FIRST candidate with no run row (a fire that has a row, whatever its
  state, is never run again: one row per fire);
* ``next_at`` moves to one second after the claimed fire (fires are whole seconds), or to NULL
  (the range is done) when that fire was the last candidate of an exhausted step;
* with every candidate taken, ``next_at`` moves past them all (NULL when the step is exhausted).

And ``pruned_through`` after a prune: the latest fire instant of the deleted ``schedule`` and
``backfill`` rows, never lowered (manual runs occupy no fire of the schedule).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

from alma_schedule.model import BackfillStep

__all__ = ["FIRE_ORIGINS", "SECOND", "next_at", "pick", "raised_pruned_through"]

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
