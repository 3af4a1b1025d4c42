"""A routine's upcoming fires as the tick will see them: the due instants, jitter applied.

docs/architecture.md, section "The modules, in detail" (engine/upcoming.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.core import After, FirePreview, bounded_latest_fire, preview_fires
from alma_schedule.model import Routine

from .decide import claims_left, due_of, policy_for, schedule_of

__all__ = ["upcoming_fires"]

SECOND = timedelta(seconds=1)


def upcoming_fires(routine: Routine, now: datetime, n: int) -> list[FirePreview]:
    """The next ``n`` fires of ``routine`` after ``now`` and after its cursor, as due instants
    (fewer past ``not_after`` or when ``max_runs`` allows fewer); each with ``fire`` set."""
    schedule = schedule_of(routine)
    if isinstance(schedule, After):  # a fixed delay knows one fire ahead: its pending one, if any
        due_next = routine.next_due_at
        note = f"{schedule.to_json()['after']} after the previous run's end"
        return [] if due_next is None or n < 1 else [FirePreview(due_next, due_next, "UTC", note, due_next)]
    policy = policy_for(routine)
    left = claims_left(routine, policy)
    count = n if left is None else min(n, left)
    anchor, last = routine.registered_at, routine.last_fire
    start = max(now, last or anchor)

    def due(fire: datetime) -> datetime:
        return due_of(routine, fire, schedule) or fire

    if policy.jitter:
        pending = bounded_latest_fire(schedule, anchor, start, policy)
        if pending is not None and (last is None or pending > last) and due(pending) > now:
            start = pending - SECOND  # its nominal instant passed; its due instant has not
    return preview_fires(schedule, anchor, start, count, policy=policy, due=due)
