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
* The schedule policies (``policy_of(routine.schedule)``, issue 15):

  - ``not_before`` / ``not_after`` (:mod:`alma_schedule.core.bounds`): fires outside the bounds
    are never due (no row); ``next_due_at`` skips to the first fire at or after ``not_before`` and
    is None past ``not_after``. The window of the last fire in the bounds still closes at the next
    NOMINAL fire.
  - ``catch_up``: the window closes at ``fire + catch_up`` if that is earlier (then
    ``max_catch_up``, the global cap); a fire the tick first sees after its window is
    ``skipped(missed)``.
  - ``max_runs``: once ``schedule_claims >= max_runs`` nothing is due (``NotDue(None)``); the claim
    transaction counts the claims and clears the index itself (:func:`claims_left`).
* ``Fire.buffer`` = the routine's ``overlap`` is ``latest`` (``policy_of(routine.schedule)``): a fire
  its active run blocks waits ``buffered`` instead of ``skipped(overlap)`` (:mod:`~alma_schedule.policies.overlap`).
* A routine that cannot be planned (a bad schedule row, a resolver that raises) is a ``Defer`` with
  back-off :func:`alma_schedule.policies.backoff.retry_at` (``Timers.backoff(defer_first,
  defer_max, error_count)``): one entry in the tick's ``errors``, and every other routine still runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
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
from alma_schedule.errors import AlmaScheduleError
from alma_schedule.model import Decision, Defer, Fire, NotDue, Routine
from alma_schedule.policies import backoff, overlap
from alma_schedule.settings import Settings

from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Planner", "claims_left", "decide", "describe_error", "policy_for", "schedule_of", "window_end"]

MAX_ERROR = 300


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
    """How many schedule fires ``max_runs`` still allows (None: no limit)."""
    if policy.max_runs is None:
        return None
    return max(policy.max_runs - routine.schedule_claims, 0)


def window_end(
    schedule: ScheduleValue, anchor: datetime, fire: datetime, policy: SchedulePolicy, settings: Settings
) -> datetime:
    """When ``fire`` stops being eligible: the next nominal fire (an ``at``: ``one_shot_window``),
    then ``catch_up``, then ``max_catch_up``, whichever is earliest."""
    following = next_fire(schedule, anchor, fire)
    end = following if following is not None else fire + settings.one_shot_window
    if policy.catch_up is not None:
        end = min(end, fire + policy.catch_up)
    if settings.max_catch_up is not None:
        end = min(end, fire + settings.max_catch_up)
    return end


def decide(routine: Routine, now: datetime, settings: Settings) -> Fire | NotDue:
    """The fire to claim for ``routine`` at ``now``, or when to look again. Pure; raises on a bad row."""
    if routine.inactive_reason is not None:
        return NotDue(None)
    schedule = schedule_of(routine)
    policy = policy_for(routine)
    if claims_left(routine, policy) == 0:
        return NotDue(None)
    anchor = routine.registered_at
    last = routine.last_fire
    fire = bounded_latest_fire(schedule, anchor, now, policy)
    if fire is None or (last is not None and fire <= last):
        after = now if last is None or last < now else last
        return NotDue(bounded_next_fire(schedule, anchor, after, policy))
    # ``fire`` is the latest fire at or before now (in the bounds), so the first fire after it in
    # the bounds is also the first one after now: the next index entry.
    following = bounded_next_fire(schedule, anchor, fire, policy)
    expires_at = window_end(schedule, anchor, fire, policy, settings)
    return Fire(
        run_id=fire_id(fire),
        fire_at=fire,
        expires_at=expires_at,
        next_due_at=following,
        resend_at=now + settings.resend_first,
        missed=now >= expires_at,
        max_runs=policy.max_runs,
        buffer=overlap.buffers(policy.overlap),
    )


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
