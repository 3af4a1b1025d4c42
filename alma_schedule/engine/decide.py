"""The pure ``decide``: one routine + now + settings -> ``Fire`` | ``NotDue`` | ``Defer``.

This is the only scheduling policy the tick applies, and it writes nothing: ``claim_due`` calls it
once per locked routine inside its transaction and writes what it answers.

* Due = the latest fire at or before ``now`` (the core's ``latest_fire``, anchored on
  ``registered_at``) that is later than the cursor ``last_fire``. Older fires are never replayed:
  after any downtime only the latest one is claimed.
* A fire stays eligible until the routine's NEXT fire (``expires_at``); an ``at`` fire, which has no
  next fire, for ``one_shot_window``. ``max_catch_up`` (optional) caps that window. A fire whose
  window has already closed at ``now`` is recorded ``skipped(missed)`` (``Fire(missed=True)``).
* ``next_due_at`` = the first fire after ``max(fire, now)`` (None when the schedule is exhausted).
* ``jitter`` (a policy): every instant above is the fire's DUE instant ``f + o(f)``
  (:func:`alma_schedule.policies.jitter.due_at`): a fire is due once ``f + o(f) <= now``, its window
  runs from ``f + o(f)`` to ``next(f) + o(next(f))`` (``max_catch_up`` counted from ``f + o(f)``),
  ``next_due_at`` is the next fire's due instant; the run id stays ``fire_id(f)``.
* A routine that cannot be planned (a bad schedule row, a resolver that raises) is a ``Defer`` with
  back-off :func:`alma_schedule.policies.backoff.retry_at` (``Timers.backoff(defer_first,
  defer_max, error_count)``): one entry in the tick's ``errors``, and every other routine still runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from alma_schedule.core import ScheduleValue, fire_id, latest_fire, next_fire, parse_schedule, policy_of
from alma_schedule.errors import AlmaScheduleError
from alma_schedule.model import Decision, Defer, Fire, NotDue, Routine
from alma_schedule.policies import backoff
from alma_schedule.policies.jitter import due_at, due_given_next
from alma_schedule.settings import Settings

from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Planner", "decide", "describe_error", "due_of", "jitter_of", "schedule_of"]

MAX_ERROR = 300
SECOND = timedelta(seconds=1)


@lru_cache(maxsize=16384)
def _parsed(items: tuple[tuple[str, Any], ...]) -> ScheduleValue:
    return parse_schedule(dict(items))


def schedule_of(routine: Routine) -> ScheduleValue:
    """The routine's parsed schedule, cached by content (a schedule JSON is a flat object of scalars)."""
    items = tuple(routine.schedule.items())
    try:
        return _parsed(items)
    except TypeError:  # an unhashable value: not a schedule the core reads; let it say why
        return parse_schedule(routine.schedule)


@lru_cache(maxsize=16384)
def _jitter(items: tuple[tuple[str, Any], ...]) -> timedelta | None:
    return policy_of(dict(items)).jitter


def jitter_of(routine: Routine) -> timedelta | None:
    """The routine's ``jitter`` policy (None: none), cached by content like :func:`schedule_of`."""
    if "jitter" not in routine.schedule:
        return None
    try:
        return _jitter(tuple(routine.schedule.items()))
    except TypeError:
        return policy_of(routine.schedule).jitter


def due_of(routine: Routine, fire: datetime | None, schedule: ScheduleValue | None = None) -> datetime | None:
    """When ``fire`` of ``routine`` comes due: ``fire + o(fire)`` (None stays None)."""
    if fire is None:
        return None
    return _due(routine, schedule_of(routine) if schedule is None else schedule, fire)


def decide(routine: Routine, now: datetime, settings: Settings) -> Fire | NotDue:
    """The fire to claim for ``routine`` at ``now``, or when to look again. Pure; raises on a bad row."""
    if routine.inactive_reason is not None:
        return NotDue(None)
    schedule = schedule_of(routine)
    jitter = jitter_of(routine)
    if jitter is not None:
        return _decide_jittered(routine, schedule, jitter, now, settings)
    anchor = routine.registered_at
    last = routine.last_fire
    fire = latest_fire(schedule, anchor, now)
    if fire is None or (last is not None and fire <= last):
        after = now if last is None or last < now else last
        return NotDue(next_fire(schedule, anchor, after))
    # ``fire`` is the latest fire at or before now, so the first fire after it is also the first
    # fire after now: the end of this fire's window and the next index entry are the same instant.
    following = next_fire(schedule, anchor, fire)
    return _fire(fire, fire, following, now, settings)


def _fire(fire: datetime, due: datetime, next_due: datetime | None, now: datetime, settings: Settings) -> Fire:
    """The claim of ``fire`` (due at ``due``), its window ending at ``next_due`` (the next fire's due
    instant) or after ``one_shot_window``, capped by ``max_catch_up`` (both counted from ``due``)."""
    expires_at = next_due if next_due is not None else due + settings.one_shot_window
    if settings.max_catch_up is not None:
        expires_at = min(expires_at, due + settings.max_catch_up)
    return Fire(
        run_id=fire_id(fire),
        fire_at=fire,
        expires_at=expires_at,
        next_due_at=next_due,
        resend_at=now + settings.resend_first,
        missed=now >= expires_at,
        due_at=due,
    )


def _decide_jittered(
    routine: Routine, schedule: ScheduleValue, jitter: timedelta, now: datetime, settings: Settings
) -> Fire | NotDue:
    """:func:`decide` with due instants f + o(f): the latest fire whose DUE instant is at or before
    now. The latest nominal fire may not be due yet (``pending``); then the one before it is, since
    a due instant is under half a gap past its fire. Each fire's next is computed once."""
    key = (routine.org, routine.uid, routine.routine_id)
    anchor, last = routine.registered_at, routine.last_fire

    def next_of(f: datetime | None) -> datetime | None:
        return None if f is None else next_fire(schedule, anchor, f)

    def due(f: datetime, following: datetime | None) -> datetime:
        return due_given_next(key, jitter, f, following)

    def not_due() -> NotDue:  # the first fire after the cursor and now, as its due instant
        first = next_of(now if last is None or last < now else last)
        return NotDue(None if first is None else due(first, next_of(first)))

    fire = latest_fire(schedule, anchor, now)
    if fire is None:
        return not_due()
    following = next_of(fire)
    fire_due = due(fire, following)
    if fire_due > now:  # pending: its nominal instant passed, its due instant has not
        pending, pending_due = fire, fire_due
        if last is not None and pending <= last:  # already behind the cursor (a restart at now)
            return not_due()
        previous = latest_fire(schedule, anchor, fire - SECOND)
        if previous is None or (last is not None and previous <= last):
            return NotDue(pending_due)
        return _fire(previous, due(previous, pending), pending_due, now, settings)
    if last is not None and fire <= last:
        return not_due()
    return _fire(fire, fire_due, None if following is None else due(following, next_of(following)), now, settings)


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
class Planner:
    """``decide`` bound to one tick's ``now``, with runner resolution and the planning back-off.

    Calling it never raises: any exception (bad row, resolver) becomes ``Defer``.
    """

    runtime: Runtime
    now: datetime

    def __call__(self, routine: Routine) -> Decision:
        try:
            self.runtime.resolve(routine)
            return decide(routine, self.now, self.runtime.settings)
        except Exception as exc:
            log.warning("routine %s cannot be planned: %s", routine.key, exc, exc_info=exc)
            s = self.runtime.settings
            until = backoff.retry_at(self.now, routine.error_count, s.defer_first, s.defer_max)
            return Defer(until=until, error=describe_error(exc))
