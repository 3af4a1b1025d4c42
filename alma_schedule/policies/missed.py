"""The fires a claim collapses, counted on their routine (issue 44): ``routines.fires_missed``.

A tick claims only a routine's LATEST due fire (guarantee 3): after downtime, a tick that expired
waiting behind long tasks, a fixed-cadence clock slower than the routine, the fires between the
cursor and the claimed fire get no run row. They are not silently lost: the claim counts them, in
the statement that already advances the cursor (``fires_missed = fires_missed + n``, no round trip
of its own), so ``routines list``, ``routines describe``, ``plan``, the dashboard and the worker's
``alma_fires_missed_total{kind}`` show them.

Which fires count (:func:`collapsed`): the fires of the schedule strictly between the cursor
(``last_fire``) and the fire claimed, inside the bounds (``not_before`` / ``not_after``). So nothing
is counted across a pause, a disable or a schedule change (each restarts the cursor at now: the
fires before were not due), nor outside the bounds; a routine's first claim counts from its
registration. The claimed fire itself always has a row (``claimed``, or ``skipped(missed)`` when
its window, e.g. ``catch_up``, has closed), so it never counts; a superseded or expired run has its
row too. With ``max_runs`` (:func:`within_runs`) at most the claims left minus the one claimed are
counted: the fires claimed and the fires counted never exceed the limit, and fires past it were
not due. A later backfill that runs a counted fire does not uncount it: the count is what the
schedule collapsed. A re-registration that lifts a finished routine's ``max_runs`` or moves its
``not_after`` keeps its cursor (the routine is due again from it, and its latest fire is claimed:
``engine/register.py``), so its first claim counts the fires since that cursor under the new
policy.

The count is exact up to :data:`CAP` per claim and stops there (a minutely routine down for a
month costs 10,000 steps of the cron search, about 30 ms, not 43,200): a claim that counted
:data:`CAP` also latches ``fires_missed_capped``, and the count is then shown with a ``+``
(:func:`shown`: ``10,000+``), a lower bound. The memory store applies this module; the SQL store's
batched UPDATE is the same rule, set-based (``fires_missed_capped OR n >= CAP``).
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
