"""When a clock sends its next tick: the wake-up policy every clock we ship follows (pure).

docs/architecture.md, section "The modules, in detail" (policies/wake.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["BEAT_FLOOR", "FIXED_CADENCE_NOTE", "WakeRules", "Wake", "decide_wake"]

#: The truth about an interval shorter than the tick period: only a fixed-cadence clock loses its
#: fires (``import-beat``'s and registration's warning).
FIXED_CADENCE_NOTE = (
    "a fixed-cadence clock (cron, `clock send`, `clock run --every`) runs it at most once per tick; "
    "beat with install(app, beat_clock=True) and `clock run` wake at each fire and keep its rate"
)

#: The least "not due" delay a beat schedule answers (beat would spin on less).
BEAT_FLOOR = timedelta(milliseconds=10)


@dataclass(frozen=True, slots=True)
class WakeRules:
    """The three durations of the policy (``Settings.tick_period``, ``hint_poll``, ``min_wake_interval``)."""

    period: timedelta
    poll: timedelta
    min_interval: timedelta


@dataclass(frozen=True, slots=True)
class Wake:
    """What a clock does at ``now``: tick (``due``) for ``woken_for``, or sleep until ``at``.

    ``reason`` is ``"start"``, ``"hint"`` or ``"heartbeat"`` for a tick, ``"sleep"`` otherwise.
    """

    due: bool
    woken_for: datetime | None
    at: datetime
    reason: str


def decide_wake(now: datetime, hint: datetime | None, *, last_sent_at: datetime | None, rules: WakeRules) -> Wake:
    """The decision at ``now`` given the hint read at this wake-up and when the last tick was sent.

    A due tick is woken for ``now`` (the instant it acts for: the hint passed at or before it);
    when not due, ``at`` is the earliest of the hint, the next poll and the heartbeat, never
    before the burst interval allows, and never ``now`` itself.
    """
    if last_sent_at is None or last_sent_at > now:  # first wake-up (or a clock stepped back)
        return Wake(True, now, now + rules.poll, "start")
    heartbeat = last_sent_at + rules.period
    earliest = last_sent_at + rules.min_interval
    if hint is not None and hint <= now:
        if now >= earliest:
            return Wake(True, now, now + rules.poll, "hint")
        return Wake(False, None, earliest, "sleep")
    if now >= heartbeat:
        return Wake(True, now, now + rules.poll, "heartbeat")
    at = min(heartbeat, now + rules.poll)
    if hint is not None:
        at = min(at, max(hint, earliest))
    return Wake(False, None, at, "sleep")
