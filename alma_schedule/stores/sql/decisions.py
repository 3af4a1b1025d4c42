"""A routine's claim decision as the SQL store takes it: ``decide``'s answer validated (instants aware
UTC, ids well formed), anything it raises or a bad answer turned into a ``Defer`` with back-off, and
the error text cleaned for the column."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Defer, Fire, NotDue, Routine, check_id
from alma_schedule.policies import backoff
from alma_schedule.settings import Timers
from alma_schedule.stores.validation import check_utc, require_utc

__all__ = ["Decision", "clean_error", "decide_checked"]

Decision = Fire | NotDue | Defer


def _utc(name: str, value: Any, *, optional: bool = False) -> Any:
    """:func:`require_utc` / :func:`check_utc`, with a fast path for values already in UTC."""
    if isinstance(value, datetime) and value.tzinfo is UTC:
        return value
    return check_utc(name, value, optional=True) if optional else require_utc(name, value)


def _is_utc(value: Any) -> bool:
    return isinstance(value, datetime) and value.tzinfo is UTC


def _opt_utc(value: Any) -> bool:
    return value is None or (isinstance(value, datetime) and value.tzinfo is UTC)


def decide_checked(
    decide: Callable[[Routine], Any],
    routine: Routine,
    now: datetime,
    timers: Timers,
    checked: dict[int, Fire] | None = None,
) -> Decision:
    """``decide``'s answer, validated; anything it raises (or a bad answer) becomes a ``Defer``.
    ``checked``: the ``Fire`` objects found valid as they are so far in this batch, by identity
    (a ``Fire`` is frozen and holds immutable values; the engine's ``decide`` hands routines that
    share a schedule, a cursor and ``now`` one cached answer): the same object is not checked again."""
    try:
        d = decide(routine)
        if checked is not None:
            seen: Fire | None = checked.get(id(d))
            if seen is not None and seen is d:
                return checked[id(d)]
        if isinstance(d, Fire):
            check_id("run_id", d.run_id)
            if _is_utc(d.fire_at) and _is_utc(d.expires_at) and _opt_utc(d.resend_at) and _opt_utc(d.next_due_at):
                if _opt_utc(d.due_at):
                    if checked is not None:
                        checked[id(d)] = d  # kept alive here: its id names no other object meanwhile
                    return d  # already aware UTC (the usual case): no copy, no conversion
            fire_at = _utc("fire_at", d.fire_at)
            expires_at = _utc("expires_at", d.expires_at)
            resend_at = _utc("resend_at", d.resend_at, optional=True)
            next_due_at = _utc("next_due_at", d.next_due_at, optional=True)
            due_at = _utc("due_at", d.due_at, optional=True)
            given = (d.fire_at, d.expires_at, d.resend_at, d.next_due_at, d.due_at)
            if (fire_at, expires_at, resend_at, next_due_at, due_at) == given:
                return d  # already aware UTC (the usual case): no copy
            return dataclasses.replace(
                d, fire_at=fire_at, expires_at=expires_at, resend_at=resend_at, next_due_at=next_due_at, due_at=due_at
            )
        if isinstance(d, NotDue):
            return NotDue(check_utc("next_due_at", d.next_due_at, optional=True))
        if isinstance(d, Defer):
            return Defer(require_utc("until", d.until), d.error)
        raise InvalidInput(f"decide returned {type(d).__name__}")
    except Exception as exc:
        return Defer(backoff.retry_at(now, routine.error_count, timers.defer_first, timers.defer_max), repr(exc))


def clean_error(text: str) -> str:
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")[:2000]
