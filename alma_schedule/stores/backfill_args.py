"""The argument checks of the backfill, system-listing and tick-log operations, shared by every
backend (the companion of :mod:`alma_schedule.stores.arguments`, kept apart so each part stays small)."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime
from typing import Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import ROUTINE_STATES, Backfill, BackfillStep, TickEndAsk, check_id
from alma_schedule.settings import Timers
from alma_schedule.stores.validation import check_limit, check_routine_key, check_text, check_utc, require_utc

RKey = tuple[str, str, str]

__all__ = [
    "backfill_args",
    "claim_backfills_args",
    "listing_args",
    "log_tick_args",
    "step_args",
    "system_routines_args",
]


def backfill_args(backfill: Backfill, now: datetime) -> tuple[RKey, Backfill, datetime]:
    """``put_backfill``: the key, the row with UTC instants (``from_at <= to_at``, ``max_fires`` a
    positive int) and ``created_at = now``."""
    if not isinstance(backfill, Backfill):
        raise InvalidInput(f"backfill must be a Backfill, not {type(backfill).__name__}")
    key = check_routine_key(backfill.scope, backfill.routine_id)
    now = require_utc("now", now)
    start = require_utc("from_at", backfill.from_at)
    end = require_utc("to_at", backfill.to_at)
    nxt = check_utc("next_at", backfill.next_at, optional=True)
    if start > end:
        raise InvalidInput(f"from_at {start.isoformat()} is after to_at {end.isoformat()}")
    n = backfill.max_fires
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInput(f"max_fires must be a positive integer, got {n!r}")
    row = dataclasses.replace(backfill, from_at=start, to_at=end, next_at=nxt, cancelled_at=None, created_at=now)
    return key, row, now


def step_args(step: BackfillStep) -> BackfillStep:
    """A plan's step: candidate ids valid, instants UTC and in strictly increasing order."""
    if not isinstance(step, BackfillStep):
        raise InvalidInput(f"plan returned {type(step).__name__}, not a BackfillStep")
    last: datetime | None = None
    for run_id, fire_at in step.candidates:
        check_id("run_id", run_id)
        at = require_utc("fire_at", fire_at)
        if last is not None and at <= last:
            raise InvalidInput("backfill candidates must be in increasing fire order")
        last = at
    require_utc("expires_at", step.expires_at)
    require_utc("resend_at", step.resend_at)
    return step


def claim_backfills_args(now: datetime, limit: int, plan: Any, timers: Timers) -> tuple[datetime, int]:
    """``claim_backfills``: ``(now, limit)``; ``plan`` is callable and ``timers`` a :class:`Timers`."""
    if not callable(plan):
        raise InvalidInput("claim_backfills needs a callable plan")
    if not isinstance(timers, Timers):
        raise InvalidInput(f"timers must be a Timers, not {type(timers).__name__}")
    return require_utc("now", now), check_limit("limit", limit)


def listing_args(kind: str | None, state: str | None) -> None:
    """``system_routines`` / ``system_routine_counts``: a kind id and one of :data:`ROUTINE_STATES`."""
    if kind is not None:
        check_id("kind", kind)
    if state is not None and (not isinstance(state, str) or state not in ROUTINE_STATES):
        shown = repr(state) if isinstance(state, str) and len(state) <= 40 else type(state).__name__
        raise InvalidInput(f"state must be one of {', '.join(ROUTINE_STATES)}, got {shown}")


def system_routines_args(
    kind: str | None, state: str | None, limit: int, after: tuple[str, str, str] | None
) -> tuple[int, RKey | None]:
    """``system_routines``: the checks of :func:`listing_args`, then ``(limit, after)``; ``after``
    an ``(org, uid, routine_id)`` triple of texts (any text pages)."""
    listing_args(kind, state)
    limit = check_limit("limit", limit)
    if after is None:
        return limit, None
    if not isinstance(after, tuple) or len(after) != 3:
        raise InvalidInput("after must be an (org, uid, routine_id) triple")
    org, uid, rid = (check_text("after", part, optional=False) or "" for part in after)
    return limit, (org, uid, rid)


def _lag(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        lag = float(value)
    except OverflowError:
        raise InvalidInput(f"{name} is too large") from None
    if not math.isfinite(lag):
        raise InvalidInput(f"{name} must be a finite number of seconds")
    return lag


def log_tick_args(
    now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None
) -> tuple[datetime, int, float | None, float | None]:
    """``log_tick``: ``(now, claimed, lag_p50, lag_p95)``; ``claimed`` a count (an int >= 0), each
    lag None or a finite number of seconds."""
    now = require_utc("now", now)
    if check_limit("claimed", claimed) != claimed:
        raise InvalidInput("claimed must be an integer of at least 0")
    return now, claimed, _lag("lag_p50", lag_p50), _lag("lag_p95", lag_p95)


def tick_end_args(ask: TickEndAsk) -> tuple[datetime, int, float | None, float | None, int | None, datetime | None]:
    """``begin_tick_end``: ``record_tick``'s arguments checked as :func:`log_tick_args`, the erroring
    read's ``limit`` (None: not asked) and the blocked read's cutoff, ``now - 2 * run_time_limit``
    (None: not asked), checked as theirs."""
    from alma_schedule.stores.arguments import age_args

    if not isinstance(ask, TickEndAsk):
        raise InvalidInput(f"the end of a tick is asked with a TickEndAsk, not {type(ask).__name__}")
    now, claimed, lag_p50, lag_p95 = log_tick_args(ask.now, ask.claimed, ask.lag_p50, ask.lag_p95)
    limit = check_limit("limit", ask.erroring_limit) if ask.erroring_limit is not None else None
    span = ask.run_time_limit
    cutoff = age_args("run_time_limit", now, span, 100, times=2)[1] if span is not None else None
    return now, claimed, lag_p50, lag_p95, limit, cutoff
