"""The "did not run" alarm (``expect`` on a schedule), as pure functions: which fire of a routine is
overdue at ``now``, what an ``expect`` may be, and the alert's back-off.

A routine with ``expect: E`` names at most ONE overdue fire at a time, its latest fire ``f`` with
``f + E <= now`` when that fire was meant to run and no run of the routine has ended successfully
(``completed``) at or after ``f``:

- the cursor: an active routine whose ``next_due_at`` is at or before ``now - E`` has a fire that
  never became a run row (no tick claimed it: the clock or the tick is down); ``next_due_at``
  (the due instant) names it;
- else the routine's latest SCHEDULE run with ``fire_at <= now - E``, unless it ended
  ``completed``, or ``skipped`` for a reason that says the fire was not meant to run
  (:data:`NOT_MEANT`: ``calendar``, ``finished``, ``paused``, ``disabled``, ``deleted``).

A paused, disabled or deleted routine names nothing (pause and disable set ``next_due_at`` NULL,
so no fire comes due meanwhile); a resume or enable restarts the cursor at ``now`` (``last_fire``
with no run row): the runs before that restart are not looked at. The alarm lasts from
``f + E`` until a run succeeds; a later fire that is overdue in turn replaces it (each fire
its own alert, :func:`~alma_schedule.model.overdue.alert_key`).

docs/architecture.md, section "The modules, in detail" (policies/overdue.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime, timedelta

from alma_schedule.core import policy_of
from alma_schedule.core.fires import next_fires
from alma_schedule.core.interval import format_interval
from alma_schedule.core.policy import SchedulePolicy
from alma_schedule.core.types import At, ScheduleValue
from alma_schedule.errors import InvalidSchedule
from alma_schedule.model import Routine, RunRecord, RunState
from alma_schedule.model.overdue import OverdueFire
from alma_schedule.timers import Timers

__all__ = [
    "ALERT_FIRST_RETRY",
    "ALERT_LEASE",
    "ALERT_MAX_RETRY",
    "NOT_MEANT",
    "RECENT_RUNS",
    "alert_retry_delay",
    "expect_of",
    "expect_refusal",
    "overdue_fire",
]

#: ``skipped`` reasons of a fire that was not meant to run (never overdue).
NOT_MEANT: frozenset[str] = frozenset({"calendar", "finished", "paused", "disabled", "deleted"})
#: How many of a routine's latest runs (newest ``fire_at`` first) a store reads for :func:`overdue_fire`.
RECENT_RUNS = 4
#: How many next fires :func:`expect_refusal` reads for a repeating schedule's shortest interval.
INTERVAL_SAMPLE = 64
#: The alert's first retry after a failed post (then doubling, capped at :data:`ALERT_MAX_RETRY`).
ALERT_FIRST_RETRY = timedelta(seconds=20)
ALERT_MAX_RETRY = timedelta(minutes=10)
#: How long a taken alert belongs to its task before a tick may send it again (a lost message).
ALERT_LEASE = timedelta(minutes=5)


def expect_of(routine: Routine) -> timedelta | None:
    """The routine's ``expect``, None without one (or on a schedule that no longer parses)."""
    try:
        return policy_of(routine.schedule).expect
    except InvalidSchedule:
        return None


def _restarted_after(routine: Routine, fire_at: datetime, recent: Sequence[RunRecord]) -> bool:
    """True when the cursor restarted (resume, enable) after ``fire_at``: ``last_fire`` is later
    and no schedule run carries it."""
    last = routine.last_fire
    if last is None or last <= fire_at:
        return False
    return not any(r.origin == "schedule" and r.fire_at == last for r in recent)


def overdue_fire(routine: Routine, recent: Sequence[RunRecord], now: datetime) -> OverdueFire | None:
    """The routine's overdue fire at ``now`` (see the module docstring), or None. ``recent``: its
    latest runs (any order; a store reads :data:`RECENT_RUNS`, newest ``fire_at`` first)."""
    if routine.deleted_at is not None or not routine.enabled or routine.paused_reason is not None:
        return None
    expect = expect_of(routine)
    if expect is None:
        return None
    try:
        cut = now - expect
    except OverflowError:  # before the first instant there is: nothing can be overdue yet
        return None
    rk = (routine.org, routine.uid, routine.routine_id)

    def succeeded_since(at: datetime) -> bool:
        return any(r.state == RunState.COMPLETED and r.origin != "backfill" and r.fire_at >= at for r in recent)

    due = routine.next_due_at
    if due is not None and due <= cut:
        if succeeded_since(due):
            return None
        return OverdueFire(*rk, fire_at=due, overdue_since=due + expect)
    fires = [r for r in recent if r.origin == "schedule" and r.fire_at <= cut]
    if not fires:
        return None
    run = max(fires, key=lambda r: (r.fire_at, r.run_id))
    if run.state == RunState.SKIPPED and run.reason in NOT_MEANT:
        return None
    if succeeded_since(run.fire_at) or _restarted_after(routine, run.fire_at, recent):
        return None
    return OverdueFire(
        *rk,
        fire_at=run.fire_at,
        overdue_since=run.fire_at + expect,
        run_id=run.run_id,
        state=run.state,
        reason=run.reason,
    )


def _shortest_interval(schedule: ScheduleValue, registered_at: datetime, now: datetime) -> timedelta | None:
    """The shortest gap between the next :data:`INTERVAL_SAMPLE` fires (None: not repeating)."""
    if isinstance(schedule, At):
        return None
    try:
        fires = next_fires(schedule, registered_at, max(now, registered_at), INTERVAL_SAMPLE)
    except (InvalidSchedule, ValueError):
        return None
    gaps = [b - a for a, b in itertools.pairwise(fires)]
    return min(gaps) if gaps else None


def expect_refusal(
    schedule: ScheduleValue, policy: SchedulePolicy, registered_at: datetime, now: datetime, hint_poll: timedelta
) -> str | None:
    """Why ``policy.expect`` is refused (the message names ``expect``), or None: shorter than the
    clock's ``hint_poll`` (no tick could see the fire end in time), or longer than a repeating
    schedule's interval (its shortest gap between fires: the next fire would come first)."""
    expect = policy.expect
    if expect is None:
        return None
    if expect < hint_poll:
        return (
            f"'expect' {format_interval(expect)} is shorter than hint_poll ({format_interval(hint_poll)}): "
            "no tick could see the fire end in time (ALMA_HINT_POLL)"
        )
    interval = _shortest_interval(schedule, registered_at, now)
    if interval is not None and expect > interval:
        return (
            f"'expect' {format_interval(expect)} is longer than the schedule's interval "
            f"({format_interval(interval)}): the next fire would come before the alarm"
        )
    return None


def alert_retry_delay(attempts: int) -> timedelta:
    """The wait before an alert's next post after ``attempts`` failed ones (20 s, doubling, 10 min cap)."""
    return Timers.backoff(ALERT_FIRST_RETRY, ALERT_MAX_RETRY, max(attempts - 1, 0))
