"""The argument checks of the backfill and system-listing operations, shared by every backend
(the companion of :mod:`alma_schedule.stores.arguments`, kept apart so each part stays small)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from alma_schedule.errors import InvalidInput
from alma_schedule.model import ROUTINE_STATES, Backfill, BackfillStep, check_id
from alma_schedule.stores.validation import check_routine_key, check_utc, require_utc

RKey = tuple[str, str, str]

__all__ = ["backfill_args", "listing_args", "step_args"]


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
    row = dataclasses.replace(
        backfill, from_at=start, to_at=end, next_at=nxt, cancelled_at=None, created_at=now
    )
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


def listing_args(kind: str | None, state: str | None) -> None:
    """``system_routines`` / ``system_routine_counts``: a kind id and one of :data:`ROUTINE_STATES`."""
    if kind is not None:
        check_id("kind", kind)
    if state is not None and state not in ROUTINE_STATES:
        raise InvalidInput(f"state must be one of {', '.join(ROUTINE_STATES)}, got {state!r}")
