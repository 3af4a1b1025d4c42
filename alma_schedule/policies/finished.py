"""Whether a routine is finished: the ONE reading of ``finished`` (issue 15).

A finished routine will never be claimed by its schedule again, whatever the clock does:

* ``not_after``: ``now`` is past its ``not_after`` bound (the bound is inclusive: at
  ``not_after`` itself the routine is not finished yet), and no fire of the bounds is still to come
  (a ``jitter`` may put the last fire's due instant after ``not_after``: it still runs);
* ``max_runs``: its schedule has claimed ``max_runs`` fires (``routines.schedule_claims``);
* ``exhausted``: no fire of its schedule remains after its cursor inside its bounds (an ``at`` that
  fired, a ``not_after`` before the next fire).

:func:`finished_reason` answers which (the first in that order), or None. The listings (``routines
list`` / ``show``, text and ``--json``), the trigger refusal (:class:`~alma_schedule.errors.Finished`,
only for ``not_after``: a manual run of a routine whose schedule ran out is still the operator's
call) and the views built later (``describe``, ``list --all``'s state filter) all read it here.
:func:`routine_state` is the one word a listing shows for a routine.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.core import bounded_next_fire, parse_schedule, policy_of
from alma_schedule.errors import InvalidInput, InvalidSchedule
from alma_schedule.model import Routine
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
    if policy.max_runs is not None and routine.schedule_claims >= policy.max_runs:
        return MAX_RUNS
    if pending is None:
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
