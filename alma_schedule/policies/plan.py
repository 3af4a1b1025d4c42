"""The pure ``decide`` (one routine + now + settings -> ``Fire`` | ``NotDue``) and :class:`Plan`, the
tick's decision handed to the store: ``decide`` at one ``now`` with the runner check, never raising.

docs/architecture.md, section "The modules, in detail" (policies/plan.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from alma_schedule.core import (
    SchedulePolicy,
    ScheduleValue,
    bounded_latest_fire,
    bounded_next_fire,
    fire_id,
    next_fire,
    parse_schedule,
    policy_of,
)
from alma_schedule.core.fires import collided_fires, run_id_of, shared_anchor
from alma_schedule.core.types import After, Cron
from alma_schedule.errors import AlmaScheduleError
from alma_schedule.model import Decision, Defer, Fire, NotDue, Routine
from alma_schedule.policies import backoff, limits, missed, overlap
from alma_schedule.policies.fixed_delay import decide_after
from alma_schedule.policies.jitter import due_at, due_given_next
from alma_schedule.settings import Settings

log = logging.getLogger("alma_schedule.engine")  # the tick's planning warnings, where they always were

__all__ = [
    "Plan",
    "claims_left",
    "decide",
    "describe_error",
    "due_of",
    "jitter_of",
    "policy_for",
    "schedule_of",
    "window_end",
]

MAX_ERROR = 300
SECOND = timedelta(seconds=1)


@lru_cache(maxsize=16384)
def _parsed(items: tuple[tuple[str, Any], ...]) -> ScheduleValue:
    return parse_schedule(dict(items))


@lru_cache(maxsize=16384)
def _policy(items: tuple[tuple[str, Any], ...]) -> SchedulePolicy:
    return policy_of(dict(items))


def policy_for(routine: Routine) -> SchedulePolicy:
    """The routine's schedule policies, cached by content like :func:`schedule_of`."""
    try:
        return _policy(tuple(routine.schedule.items()))
    except TypeError:
        return policy_of(routine.schedule)


def schedule_of(routine: Routine) -> ScheduleValue:
    """The routine's parsed schedule, cached by content (a schedule JSON is a flat object of scalars)."""
    items = tuple(routine.schedule.items())
    try:
        return _parsed(items)
    except TypeError:  # an unhashable value: not a schedule the core reads; let it say why
        return parse_schedule(routine.schedule)


def claims_left(routine: Routine, policy: SchedulePolicy) -> int | None:
    """How many schedule fires ``max_runs`` still allows to start (None: no limit): the claim side
    claims while this is above 0 (:func:`alma_schedule.policies.limits.starts_left`)."""
    return limits.starts_left(routine.schedule_starts, policy.max_runs)


def window_end(
    schedule: ScheduleValue, anchor: datetime, fire: datetime, policy: SchedulePolicy, settings: Settings
) -> datetime:
    """When ``fire`` (no jitter) stops being eligible: the next nominal fire (an ``at``:
    ``one_shot_window``), then ``catch_up``, then ``max_catch_up``, whichever is earliest."""
    return _close(fire, next_fire(schedule, anchor, fire), policy, settings)


def _close(due: datetime, next_due: datetime | None, policy: SchedulePolicy, settings: Settings) -> datetime:
    """The end of a window that opens at ``due`` (a fire's due instant): ``next_due`` (the next
    nominal fire's due instant; None: ``due + one_shot_window``), capped by ``catch_up`` and then
    ``max_catch_up``, both counted from ``due``."""
    return _close_at(due, next_due, policy, settings.one_shot_window, settings.max_catch_up)


def _close_at(
    due: datetime, next_due: datetime | None, policy: SchedulePolicy, window: timedelta, cap: timedelta | None
) -> datetime:
    """:func:`_close` with the two settings it reads (``one_shot_window``, ``max_catch_up``)."""
    end = next_due if next_due is not None else due + window
    if policy.catch_up is not None:
        end = min(end, due + policy.catch_up)
    if cap is not None:
        end = min(end, due + cap)
    return end


def jitter_of(routine: Routine) -> timedelta | None:
    """The routine's ``jitter`` policy (None: none), cached by content like :func:`schedule_of`."""
    return policy_for(routine).jitter if "jitter" in routine.schedule else None


def due_of(routine: Routine, fire: datetime | None, schedule: ScheduleValue | None = None) -> datetime | None:
    """When ``fire`` of ``routine`` comes due: ``fire + o(fire)`` (None stays None)."""
    if fire is None:
        return None
    return _due(routine, schedule_of(routine) if schedule is None else schedule, fire)


def decide(routine: Routine, now: datetime, settings: Settings) -> Fire | NotDue:
    """The fire to claim for ``routine`` at ``now``, or when to look again. Pure; raises on a bad row.

    Without jitter the answer is a function of (schedule object, anchor, cursor, now, three
    settings) alone, so routines that share them share one answer (:func:`_shared`); the anchor is
    first replaced by :func:`~alma_schedule.core.fires.shared_anchor`, which answers the same."""
    if routine.inactive_reason is not None:
        return NotDue(None)
    items: tuple[tuple[str, Any], ...] | None = tuple(routine.schedule.items())
    try:
        schedule, policy = _planned(items)
    except TypeError:  # an unhashable value: not a schedule the core reads; let it say why
        schedule, policy, items = parse_schedule(routine.schedule), policy_of(routine.schedule), None
    if claims_left(routine, policy) == 0:
        return NotDue(None)
    if isinstance(schedule, After):  # its next fire is data (the end of its last run), not a rule
        return decide_after(routine, policy, now, settings.resend_first)
    if policy.jitter:
        answer = _decide_jittered(routine, schedule, policy, now, settings)
        answer = _with_collided(answer, schedule, routine.registered_at, routine.last_fire, policy)
        return answer if policy.max_runs is None else _within_runs(answer, routine, policy)
    anchor, last = routine.registered_at, routine.last_fire
    window, cap, resend = settings.one_shot_window, settings.max_catch_up, settings.resend_first
    if items is not None and _plain(now) and _plain(anchor) and (last is None or _plain(last)):
        until = now if policy.not_after is None or policy.not_after >= now else policy.not_after
        answer = _shared(items, shared_anchor(schedule, anchor, until), last, now, window, cap, resend)
    else:
        answer = _decide_plain(schedule, policy, anchor, last, now, window, cap, resend)
    if (last is None or last < anchor) and isinstance(answer, Fire):
        # counted from the cursor alone above; without one (or one before the anchor): from the anchor
        count = missed.collapsed(schedule, policy, answer.fire_at, last, anchor)
        if count != answer.fires_missed:
            answer = replace(answer, fires_missed=count)
    answer = _with_collided(answer, schedule, anchor, last, policy)
    return answer if policy.max_runs is None else _within_runs(answer, routine, policy)


def _with_collided(
    answer: Fire | NotDue, schedule: ScheduleValue, anchor: datetime, last: datetime | None, policy: SchedulePolicy
) -> Fire | NotDue:
    """``answer`` (a claim of a cron on a business calendar; any other answer as it is) carrying the
    calendar's collided fires since the cursor (the anchor without one; none before ``not_before``):
    the ``skipped(calendar)`` rows written beside the claim (:func:`~alma_schedule.core.fires.collided_fires`)."""
    if not isinstance(answer, Fire) or not isinstance(schedule, Cron) or schedule.calendar is None:
        return answer
    after = last if last is not None and last >= anchor else anchor - SECOND
    if policy.not_before is not None and policy.not_before - SECOND > after:
        after = policy.not_before - SECOND
    collided = collided_fires(schedule, after, answer.fire_at)
    return replace(answer, collided=collided) if collided else answer


def _within_runs(answer: Fire | NotDue, routine: Routine, policy: SchedulePolicy) -> Fire | NotDue:
    """``answer`` with its collapsed fires counted inside ``max_runs`` (:func:`missed.within_runs`)."""
    if not isinstance(answer, Fire) or not answer.fires_missed:
        return answer
    count = missed.within_runs(answer.fires_missed, claims_left(routine, policy))
    return answer if count == answer.fires_missed else replace(answer, fires_missed=count)


def _plain(instant: datetime) -> bool:
    """A plain ``datetime`` in UTC: equal ones are the same value (a cache key gives back the same)."""
    return type(instant) is datetime and instant.tzinfo is UTC


@lru_cache(maxsize=16384)
def _planned(items: tuple[tuple[str, Any], ...]) -> tuple[ScheduleValue, SchedulePolicy]:
    return _parsed(items), _policy(items)


@lru_cache(maxsize=4096)  # a tick asks at one ``now``: a few ticks of answers
def _shared(
    items: tuple[tuple[str, Any], ...],
    anchor: datetime,
    last: datetime | None,
    now: datetime,
    window: timedelta,
    cap: timedelta | None,
    resend: timedelta,
) -> Fire | NotDue:
    """:func:`_decide_plain` cached by everything it reads (the schedule object's items for the
    schedule and its policies). Every instant is a plain UTC datetime, so a hit is the same answer."""
    schedule, policy = _planned(items)
    return _decide_plain(schedule, policy, anchor, last, now, window, cap, resend)


def _decide_plain(
    schedule: ScheduleValue,
    policy: SchedulePolicy,
    anchor: datetime,
    last: datetime | None,
    now: datetime,
    window: timedelta,
    cap: timedelta | None,
    resend: timedelta,
) -> Fire | NotDue:
    """:func:`decide` without jitter, from the parts it reads."""
    fire = bounded_latest_fire(schedule, anchor, now, policy)
    if fire is None or (last is not None and fire <= last):
        after = now if last is None or last < now else last
        return NotDue(bounded_next_fire(schedule, anchor, after, policy))
    # ``fire`` is the latest fire at or before now in the bounds (so at or after not_before): the
    # first fire after it is also the first one after now, the next index entry unless past
    # not_after, and its window closes at that nominal fire (computed once for both).
    nominal = next_fire(schedule, anchor, fire)
    following = None if nominal is None or (policy.not_after is not None and nominal > policy.not_after) else nominal
    expires_at = _close_at(fire, nominal, policy, window, cap)
    # the collapsed fires from the cursor alone (``anchor`` may be a shared one, which drops the fires
    # before it); :func:`decide` counts a first claim's from the routine's own anchor
    count = 0 if last is None else missed.collapsed(schedule, policy, fire, last, None)
    return _fire(fire, fire, expires_at, following, now, resend, policy, count, schedule)


def _fire(
    fire: datetime,
    due: datetime,
    expires_at: datetime,
    next_due: datetime | None,
    now: datetime,
    resend: timedelta,
    policy: SchedulePolicy,
    fires_missed: int = 0,
    schedule: ScheduleValue | None = None,
) -> Fire:
    """The claim of ``fire`` (due at ``due``), its window closing at ``expires_at``, collapsing
    ``fires_missed`` fires; its run id the nominal instant (``run_id_of``: a fire rolled by a
    business calendar keeps the id of the instant it rolled from)."""
    return Fire(
        run_id=fire_id(fire) if schedule is None else run_id_of(schedule, fire),
        fire_at=fire,
        expires_at=expires_at,
        next_due_at=next_due,
        resend_at=now + resend,
        missed=now >= expires_at,
        max_runs=policy.max_runs,
        buffer=overlap.buffers(policy.overlap),
        due_at=due,
        fires_missed=fires_missed,
    )


def _decide_jittered(
    routine: Routine, schedule: ScheduleValue, policy: SchedulePolicy, now: datetime, settings: Settings
) -> Fire | NotDue:
    """:func:`decide` with due instants f + o(f): the latest fire in the bounds whose due instant is
    at or before now. The latest nominal fire may not be due yet (``pending``); then the one before
    it is, since a due instant is under half a gap past its fire. The bounds select nominal fires;
    o(f) and the window's end read the schedule's own next fire. Each fire's next is computed once."""
    key = (routine.org, routine.uid, routine.routine_id)
    anchor, last, jitter = routine.registered_at, routine.last_fire, policy.jitter

    def next_of(f: datetime | None) -> datetime | None:
        return None if f is None else next_fire(schedule, anchor, f)

    def due(f: datetime, following: datetime | None) -> datetime:
        return due_given_next(key, jitter, f, following)

    def due_in_bounds(after: datetime) -> datetime | None:  # the first fire after ``after``, as due
        first = bounded_next_fire(schedule, anchor, after, policy)
        return None if first is None else due(first, next_of(first))

    def not_due() -> NotDue:  # the first fire after the cursor and now, as its due instant
        return NotDue(due_in_bounds(now if last is None or last < now else last))

    fire = bounded_latest_fire(schedule, anchor, now, policy)
    if fire is None:
        return not_due()
    following = next_of(fire)
    fire_due = due(fire, following)
    if fire_due > now:  # pending: its nominal instant passed, its due instant has not
        pending, pending_due = fire, fire_due
        if last is not None and pending <= last:  # already behind the cursor (a restart at now)
            return not_due()
        # the fires between two fires of the bounds are in the bounds: previous's next is pending
        previous = bounded_latest_fire(schedule, anchor, fire - SECOND, policy)
        if previous is None or (last is not None and previous <= last):
            return NotDue(pending_due)
        previous_due = due(previous, pending)
        window = _close(previous_due, pending_due, policy, settings)
        count = missed.collapsed(schedule, policy, previous, last, anchor)
        return _fire(previous, previous_due, window, pending_due, now, settings.resend_first, policy, count, schedule)
    if last is not None and fire <= last:
        return not_due()
    following_due = None if following is None else due(following, next_of(following))
    window = _close(fire_due, following_due, policy, settings)
    # ``fire`` is at or after not_before, so its next fire is in the bounds unless past not_after
    inside = following is not None and (policy.not_after is None or following <= policy.not_after)
    count = missed.collapsed(schedule, policy, fire, last, anchor)
    nxt = following_due if inside else None
    return _fire(fire, fire_due, window, nxt, now, settings.resend_first, policy, count, schedule)


def _due(routine: Routine, schedule: ScheduleValue, fire: datetime) -> datetime:
    key = (routine.org, routine.uid, routine.routine_id)
    return due_at(schedule, routine.registered_at, key, jitter_of(routine), fire)


def describe_error(exc: BaseException) -> str:
    """What a planning error may say in ``errors`` and ``last_error``: our own errors keep their
    message (they name the field); foreign exceptions only their class (the message goes to the log)."""
    if isinstance(exc, AlmaScheduleError):
        text = f"{type(exc).__name__}: {exc}"
    else:
        text = type(exc).__name__
    return text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 3] + "..."


@dataclass(frozen=True, slots=True)
class Plan:
    """:func:`decide` at one tick's ``now``, after ``runnable(routine)`` (raises when no runner serves
    it). Never raises: any exception becomes ``Defer`` with the planning back-off. Its answers are
    aware UTC and well formed, so a store takes them as they are (no re-check)."""

    now: datetime
    settings: Settings
    runnable: Callable[[Routine], object]

    def __call__(self, routine: Routine) -> Decision:
        try:
            self.runnable(routine)
            return decide(routine, self.now, self.settings)
        except Exception as exc:
            log.warning("routine %s cannot be planned: %s", routine.key, exc, exc_info=exc)
            s = self.settings
            until = backoff.retry_at(self.now, routine.error_count, s.defer_first, s.defer_max)
            return Defer(until=until, error=describe_error(exc))
