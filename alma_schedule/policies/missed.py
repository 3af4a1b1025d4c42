"""The fires a claim collapses, counted on their routine: ``routines.fires_missed``.

docs/architecture.md, section "The modules, in detail" (policies/missed.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.core.fires import count_fires_before
from alma_schedule.core.policy import SchedulePolicy
from alma_schedule.core.types import ScheduleValue

__all__ = ["CAP", "add", "collapsed", "shown", "within_runs"]

#: The most fires one claim counts (a claim that reaches it latches ``fires_missed_capped``).
CAP = 10_000
_TICK = timedelta(microseconds=1)


def collapsed(
    schedule: ScheduleValue,
    policy: SchedulePolicy,
    fire: datetime,
    last: datetime | None,
    registered_at: datetime | None,
) -> int:
    """How many fires of ``schedule`` inside the bounds lie strictly between the cursor ``last`` and
    ``fire`` (a fire of the schedule, the one claimed), at most :data:`CAP`. ``last`` None (no claim
    yet): from ``registered_at``, the anchor, on. ``registered_at`` None with a cursor: the cursor is
    at or past the anchor (every cursor a store writes is), so only the cursor bounds the count."""
    if last is None:
        if registered_at is None:
            return 0
        after = registered_at - _TICK  # a cron may fire at the anchor itself
    else:
        after = last
    if policy.not_before is not None and policy.not_before - _TICK > after:
        after = policy.not_before - _TICK  # a fire exactly at not_before counts
    if after >= fire:
        return 0
    return count_fires_before(schedule, fire, after, registered_at, CAP)


def within_runs(count: int, claims_left: int | None) -> int:
    """``count`` with ``max_runs``: at most the claims left (None: no limit) minus the one claimed."""
    if claims_left is None:
        return count
    return min(count, max(claims_left - 1, 0))


def add(total: int, capped: bool, count: int) -> tuple[int, bool]:
    """The routine's ``(fires_missed, fires_missed_capped)`` after a claim that counted ``count``."""
    return total + count, capped or count >= CAP


def shown(count: int, capped: bool) -> str:
    """The count as every surface shows it: ``1,234``, or ``10,000+`` once a claim reached the cap."""
    return f"{count:,}+" if capped else f"{count:,}"
