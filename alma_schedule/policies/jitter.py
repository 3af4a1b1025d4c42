"""Jitter: how long after its nominal instant a routine's fire comes due (the ``jitter`` policy).

docs/architecture.md, section "The modules, in detail" (policies/jitter.py).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from itertools import pairwise

from alma_schedule.core import ScheduleValue, fire_id, next_fire, next_fires
from alma_schedule.core.interval import format_interval

__all__ = ["GAP_HORIZON", "due_at", "due_given_next", "hash_input", "jitter_offset", "jitter_refusal", "smallest_gap"]

#: How many upcoming fires registration looks at for the smallest gap.
GAP_HORIZON = 1000
SECOND = timedelta(seconds=1)


def hash_input(org: str, uid: str, routine_id: str, fire: datetime) -> bytes:
    """The bytes sha256 reads for ``o(fire)``: UTF-8 of the four fields joined by NUL."""
    return "\x00".join((org, uid, routine_id, fire_id(fire))).encode("utf-8")


def jitter_offset(
    org: str, uid: str, routine_id: str, fire: datetime, jitter: timedelta | None, gap: timedelta | None
) -> timedelta:
    """``o(fire)`` in whole seconds: sha256 of :func:`hash_input` mod ``min(jitter, gap / 2)``.

    ``gap`` None (no next fire) leaves ``jitter`` as the bound; no jitter, or a bound under one
    second, is ``0``. Pure and the same in every process."""
    if not jitter:
        return timedelta(0)
    bound = jitter if gap is None else min(jitter, gap / 2)
    seconds = int(bound.total_seconds())
    if seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(hash_input(org, uid, routine_id, fire)).digest()
    return timedelta(seconds=int.from_bytes(digest, "big") % seconds)


def due_at(
    schedule: ScheduleValue,
    registered_at: datetime,
    key: tuple[str, str, str],
    jitter: timedelta | None,
    fire: datetime,
) -> datetime:
    """``fire + o(fire)``: when the fire comes due (the fire itself without jitter). ``key`` is
    ``(org, uid, routine_id)``."""
    if not jitter:
        return fire
    return due_given_next(key, jitter, fire, next_fire(schedule, registered_at, fire))


def due_given_next(
    key: tuple[str, str, str], jitter: timedelta | None, fire: datetime, following: datetime | None
) -> datetime:
    """:func:`due_at` when the caller already knows the fire after ``fire`` (``following``)."""
    gap = None if following is None else following - fire
    return fire + jitter_offset(*key, fire, jitter, gap)


def smallest_gap(
    schedule: ScheduleValue, registered_at: datetime, after: datetime, horizon: int = GAP_HORIZON
) -> timedelta | None:
    """The smallest time between two consecutive fires among the next ``horizon`` after ``after``
    (None with fewer than two fires)."""
    fires = next_fires(schedule, registered_at, after, horizon)
    gaps = [b - a for a, b in pairwise(fires)]
    return min(gaps) if gaps else None


def jitter_refusal(
    schedule: ScheduleValue, registered_at: datetime, after: datetime, jitter: timedelta | None
) -> str | None:
    """Why registration refuses ``jitter`` (it is at or above the smallest gap among the next
    :data:`GAP_HORIZON` fires), or None when it is accepted."""
    if not jitter:
        return None
    gap = smallest_gap(schedule, registered_at, after)
    if gap is None or jitter < gap:
        return None
    return (
        f"'jitter' {format_interval(jitter)} must be shorter than the smallest gap between fires "
        f"({format_interval(gap)} among the next {GAP_HORIZON})"
    )
