"""Fixed-delay routines (``{"after": "10m"}``): when their next fire is due, written once for the
tick (:func:`decide_after`), a restart (:func:`restart_after`) and the end of a run (:func:`rearmed_due`).

A fixed-delay routine keeps ONE pending fire in ``next_due_at``: set at registration (the
registration instant, or ``not_before``), cleared when the tick claims it (the run is in flight),
and set again by the transaction that writes the end of a run: ``ceil(end) + after``, its jitter
``o`` added to that instant (the jitter is part of the delay, so the fire instant, and the run id
that names it, is the instant it comes due). A fire skipped while paused or disabled counts from
the skip: resume and enable restart the delay at that instant. Pure: ``now`` and the end are given.

docs/architecture.md, section "The modules, in detail" (policies/fixed_delay.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.core import SchedulePolicy, fire_id, parse_schedule, policy_of
from alma_schedule.core.types import After, ScheduleValue
from alma_schedule.errors import InvalidInput, InvalidSchedule
from alma_schedule.model import Fire, NotDue, Routine
from alma_schedule.policies import limits
from alma_schedule.policies.jitter import jitter_offset

__all__ = ["WINDOW", "decide_after", "delay_of", "rearmed_due", "restart_after"]

#: How long a claimed fixed-delay fire waits for a worker: it never closes in practice (there is no
#: next nominal fire to give way to; an unstarted run is re-sent with back-off until a worker starts it).
WINDOW = timedelta(days=3650)
_SECOND = timedelta(seconds=1)


def delay_of(schedule: ScheduleValue) -> timedelta | None:
    """The delay of a fixed-delay schedule, None for every other kind."""
    return schedule.delay if isinstance(schedule, After) else None


def _ceil(instant: datetime) -> datetime:
    """``instant`` rounded up to a whole second (fires are whole seconds)."""
    whole = instant.replace(microsecond=0)
    return whole if whole == instant else whole + _SECOND


def restart_after(routine: Routine, delay: timedelta, policy: SchedulePolicy, at: datetime) -> datetime | None:
    """The next fire of a fixed-delay routine whose delay starts at ``at`` (a run's end, a resume,
    an enable): ``ceil(at) + delay + o``; None past ``not_after`` or once ``max_runs`` is reached."""
    if limits.starts_left(routine.schedule_starts, policy.max_runs) == 0:
        return None
    nominal = _ceil(at) + delay
    if policy.not_before is not None and nominal < policy.not_before:
        nominal = policy.not_before
    if policy.not_after is not None and nominal > policy.not_after:
        return None
    key = (routine.org, routine.uid, routine.routine_id)
    return nominal + jitter_offset(*key, nominal, policy.jitter, None)


def rearmed_due(routine: Routine, ended_at: datetime) -> datetime | None:
    """What the end of a run of ``routine`` at ``ended_at`` writes to ``next_due_at`` in the same
    transaction: the next fire when the routine is a fixed-delay one, active and without a pending
    fire; None when nothing is to be written (any other routine, a paused one: its resume restarts
    the delay; a routine that already has its next fire). A schedule that no longer parses: None."""
    if routine.inactive_reason is not None or routine.next_due_at is not None:
        return None
    try:
        schedule = parse_schedule(routine.schedule)
        policy = policy_of(routine.schedule)
    except (InvalidSchedule, InvalidInput):
        return None
    delay = delay_of(schedule)
    return None if delay is None else restart_after(routine, delay, policy, ended_at)


def decide_after(routine: Routine, policy: SchedulePolicy, now: datetime, resend: timedelta) -> Fire | NotDue:
    """The tick's decision for a fixed-delay routine: its pending fire (``next_due_at``) when due,
    with no next fire (the end of its run sets it); else when to look again."""
    due = routine.next_due_at
    if due is None:
        return NotDue(None)
    if due > now:
        return NotDue(due)
    if routine.last_fire is not None and due <= routine.last_fire:  # claimed already: wait for its end
        return NotDue(None)
    if policy.not_after is not None and due > policy.not_after:
        return NotDue(None)
    return Fire(
        run_id=fire_id(due),
        fire_at=due,
        expires_at=due + WINDOW,
        next_due_at=None,
        resend_at=now + resend,
        missed=False,
        max_runs=policy.max_runs,
        buffer=False,
        due_at=due,
        fires_missed=0,
    )
