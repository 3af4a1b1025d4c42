"""A routine's upcoming fires as the tick will see them: the due instants, jitter applied.

``routines next`` (and any other preview of a stored routine) reads this, so what it shows is what
:func:`~alma_schedule.engine.decide.decide` then claims: the same due instants
(:func:`~alma_schedule.engine.decide.due_of`), including a fire whose nominal instant has passed but
whose jittered instant has not.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.core import FirePreview, latest_fire, preview_fires
from alma_schedule.model import Routine

from .decide import due_of, jitter_of, schedule_of

__all__ = ["upcoming_fires"]

SECOND = timedelta(seconds=1)


def upcoming_fires(routine: Routine, now: datetime, n: int) -> list[FirePreview]:
    """The next ``n`` fires of ``routine`` after ``now`` and after its cursor, as due instants."""
    schedule = schedule_of(routine)
    anchor, last = routine.registered_at, routine.last_fire
    start = max(now, last or anchor)
    if jitter_of(routine) is not None:
        pending = latest_fire(schedule, anchor, start)
        if pending is not None and (last is None or pending > last) and (due_of(routine, pending) or pending) > now:
            start = pending - SECOND  # its nominal instant passed; its due instant has not

    def due(fire: datetime) -> datetime:
        return due_of(routine, fire, schedule) or fire

    return preview_fires(schedule, anchor, start, n, due=due)
