"""Fires inside a routine's bounds: ``not_before`` / ``not_after`` (:mod:`.policy`) over the timing.

docs/architecture.md, section "The modules, in detail" (core/bounds.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.core.fires import latest_fire, next_fire
from alma_schedule.core.policy import DEFAULT_POLICY, SchedulePolicy
from alma_schedule.core.types import ScheduleValue
from alma_schedule.errors import InvalidSchedule

__all__ = ["bounded_latest_fire", "bounded_next_fire", "bounded_next_fires"]

_TICK = timedelta(microseconds=1)


def bounded_next_fire(
    schedule: ScheduleValue, registered_at: datetime, after: datetime, policy: SchedulePolicy = DEFAULT_POLICY
) -> datetime | None:
    """The first fire ``f > after`` with ``not_before <= f <= not_after`` (each bound optional)."""
    start = after
    if policy.not_before is not None and policy.not_before - _TICK > start:
        start = policy.not_before - _TICK  # so a fire exactly at not_before is found
    fire = next_fire(schedule, registered_at, start)
    if fire is None or (policy.not_after is not None and fire > policy.not_after):
        return None
    return fire


def bounded_latest_fire(
    schedule: ScheduleValue, registered_at: datetime, now: datetime, policy: SchedulePolicy = DEFAULT_POLICY
) -> datetime | None:
    """The latest fire ``f <= now`` with ``not_before <= f <= not_after``, or None."""
    until = now if policy.not_after is None or policy.not_after >= now else policy.not_after
    fire = latest_fire(schedule, registered_at, until)
    if fire is None or (policy.not_before is not None and fire < policy.not_before):
        return None
    return fire


def bounded_next_fires(
    schedule: ScheduleValue,
    registered_at: datetime,
    after: datetime,
    n: int,
    policy: SchedulePolicy = DEFAULT_POLICY,
) -> list[datetime]:
    """The next ``n`` fires after ``after`` inside the bounds (fewer when they run out)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidSchedule(f"n must be a non-negative integer, got {n!r}")
    out: list[datetime] = []
    cursor = after
    while len(out) < n:
        fire = bounded_next_fire(schedule, registered_at, cursor, policy)
        if fire is None:
            break
        out.append(fire)
        cursor = fire
    return out
