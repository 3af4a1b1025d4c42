"""Whether a routine is finished: the one reading of ``finished``.

docs/architecture.md, section "The modules, in detail" (policies/finished.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.core import bounded_next_fire, parse_schedule, policy_of
from alma_schedule.errors import InvalidInput, InvalidSchedule
from alma_schedule.model import Routine
from alma_schedule.policies.fixed_delay import delay_of
from alma_schedule.policies.jitter import due_at

__all__ = ["EXHAUSTED", "FINISHED", "MAX_RUNS", "NOT_AFTER", "finished_reason", "routine_state"]

NOT_AFTER = "not_after"
MAX_RUNS = "max_runs"
EXHAUSTED = "exhausted"
#: The state word of a finished routine in listings.
FINISHED = "finished"
_SECOND = timedelta(seconds=1)


def finished_reason(routine: Routine, now: datetime) -> str | None:
    """``not_after``, ``max_runs`` or ``exhausted`` when ``routine`` is finished at ``now``, else None.

    Pure. A schedule that no longer parses is not finished (the tick reports it instead)."""
    try:
        policy = policy_of(routine.schedule)
        schedule = parse_schedule(routine.schedule)
    except (InvalidSchedule, InvalidInput):
        return None
    after = routine.last_fire if routine.last_fire is not None else routine.registered_at - _SECOND
    pending = bounded_next_fire(schedule, routine.registered_at, after, policy)
    if policy.not_after is not None and now > policy.not_after and not _jittered_ahead(routine, pending, now):
        return NOT_AFTER
    if policy.max_runs is not None and routine.schedule_starts >= policy.max_runs:
        return MAX_RUNS
    if pending is None and delay_of(schedule) is None:  # a fixed delay's next fire comes with a run's end
        return EXHAUSTED
    return None


def _jittered_ahead(routine: Routine, pending: datetime | None, now: datetime) -> bool:
    """True while a fire inside the bounds (at or before ``not_after``) is still to come because its
    ``jitter`` puts its due instant ``f + o(f)`` after ``now`` (the bounds read the nominal fire)."""
    if pending is None:
        return False
    policy = policy_of(routine.schedule)
    if not policy.jitter:
        return False
    key = (routine.org, routine.uid, routine.routine_id)
    return due_at(parse_schedule(routine.schedule), routine.registered_at, key, policy.jitter, pending) > now


def routine_state(routine: Routine, now: datetime) -> str:
    """The one word a listing shows: ``deleted``, ``finished``, ``disabled``, ``paused`` or ``active``
    (in that order of precedence)."""
    if routine.deleted_at is not None:
        return "deleted"
    if finished_reason(routine, now) is not None:
        return FINISHED
    return routine.inactive_reason or "active"
