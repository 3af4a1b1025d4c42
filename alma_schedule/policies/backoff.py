"""The planning back-off of a routine that cannot be planned (``docs/architecture.md``, the cursor).

docs/architecture.md, section "The modules, in detail" (policies/backoff.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.settings import Timers

__all__ = [
    "CLEAR",
    "ERROR_STEP",
    "PlanningBackoff",
    "deferred",
    "first_deferral",
    "held_back",
    "next_poll",
    "retry_at",
]

#: How much one deferral adds to ``error_count``.
ERROR_STEP = 1


@dataclass(frozen=True, slots=True)
class PlanningBackoff:
    """The back-off columns of a routine row."""

    defer_until: datetime | None
    last_error: str | None
    error_count: int

    def fields(self) -> dict[str, Any]:
        """As routine column values (``defer_until``, ``last_error``, ``error_count``)."""
        return {"defer_until": self.defer_until, "last_error": self.last_error, "error_count": self.error_count}


#: No back-off: what a fire (or a fresh registration) leaves.
CLEAR = PlanningBackoff(None, None, 0)


def retry_at(now: datetime, error_count: int, first: timedelta, cap: timedelta) -> datetime:
    """When a routine that failed to plan is tried again: ``now + Timers.backoff(first, cap,
    error_count)`` (``first``/``cap`` are ``defer_first``/``defer_max``)."""
    return now + Timers.backoff(first, cap, error_count)


def deferred(error_count: int, until: datetime, error: str) -> PlanningBackoff:
    """The back-off columns after applying ``Defer(until, error)`` to a row at ``error_count``."""
    return PlanningBackoff(until, error, error_count + ERROR_STEP)


def first_deferral(error_count: int) -> bool:
    """Whether a deferral of a row at ``error_count`` is the first of its streak."""
    return error_count == 0


def held_back(defer_until: datetime | None, now: datetime) -> bool:
    """Whether the back-off keeps the routine out of the due scan at ``now``."""
    return defer_until is not None and defer_until > now


def next_poll(scheduled: datetime, now: datetime, deadline: datetime | None, tolerance: timedelta) -> datetime:
    """When a submitted job is polled next: its back-off step ``scheduled``, unless its deadline
    comes first: then at ``deadline + tolerance``, the first instant ``timed_out`` may be recorded
    (a clock may lead by ``tolerance``), so a deadline is enforced on time, never a back-off step
    late. A deadline already enforceable at ``now`` changes nothing (this poll records it)."""
    if deadline is None:
        return scheduled
    due = deadline + tolerance
    return due if now < due < scheduled else scheduled
