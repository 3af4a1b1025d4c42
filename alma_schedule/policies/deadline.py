"""A submitted run's deadline: when its message expires, and when it is ``timed_out``.

docs/architecture.md, section "The modules, in detail" (policies/deadline.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["message_expires", "timed_out"]


def message_expires(deadline_in: timedelta, expires_after: float | None) -> float:
    """The ``expires`` of a tracked task's message, in seconds after the send: the deadline
    (``deadline_in`` from the send), or the routine's ``options.expires`` when that is earlier.

    docs/architecture.md, "The modules, in detail" (policies/deadline.py, message_expires).
    """
    seconds = deadline_in.total_seconds()
    return seconds if expires_after is None else min(seconds, float(expires_after))


def timed_out(deadline: datetime | None, now: datetime, tolerance: timedelta) -> bool:
    """Whether a submitted run with ``deadline`` is ``timed_out`` at ``now`` (at or past
    ``deadline + tolerance``, the instant its poll is due); a run without a deadline never is."""
    return deadline is not None and now >= deadline + tolerance
