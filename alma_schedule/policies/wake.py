"""When a clock sends its next tick: the wake-up policy every clock we ship follows (pure).

A clock wakes at the store's wake-up hint (the earliest instant strictly after the last tick's
instant at which a tick has something to do: a fire, a planning back-off's end, a re-send, an
expiry, a poll; :meth:`~alma_schedule.stores.system.SystemStore.peek_wake`), re-reads that hint at
least every ``hint_poll`` while it sleeps (a routine registered, resumed or triggered meanwhile is
seen at the next poll), and ticks at least once per ``tick_period`` (the heartbeat, never the
resolution). See docs/architecture.md, "The clock".

* A hint at or before ``now`` makes it tick at once, but never sooner than ``min_wake_interval``
  after its previous tick: a burst of instants close together costs one tick per interval, and
  each tick claims everything due by the time it runs.
* A hint beyond the heartbeat is capped at the heartbeat; no hint (the store could not answer, or
  nothing is ever due) falls back to the heartbeat.
* The next probe asks for the hint strictly after the instant the clock last ticked for, so a
  tick still in flight does not make the clock tick again for the same fires.

Nothing here can make a fire run twice: ticks are advisory, the claims are the only authority.
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
