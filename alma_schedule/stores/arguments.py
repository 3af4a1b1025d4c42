"""The argument checks of each store operation, shared by every backend (memory and SQL).
docs/architecture.md, section "The modules, in detail" (stores/arguments.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import (
    ANNOTATABLE,
    BLOCKED_WHY,
    NON_TERMINAL,
    TERMINAL,
    WAITING,
    Ceiling,
    ClaimScan,
    Routine,
    RunKey,
    RunResult,
    Scope,
    check_id,
    check_new_id,
    check_scope,
)
from alma_schedule.model.provenance import check_source
from alma_schedule.model.time import MIN_INSTANT
from alma_schedule.policies.ownership import check_owner
from alma_schedule.settings import Timers
from alma_schedule.stores.validation import (
    check_from_states,
    check_json,
    check_limit,
    check_micros,
    check_reason,
    check_routine_key,
    check_text,
    check_utc,
    require_utc,
)

RKey = tuple[str, str, str]
ALL_STATES = NON_TERMINAL | WAITING | TERMINAL

__all__ = [
    "ALL_STATES",
    "FinishArgs",
    "ManualClaimArgs",
    "PutRoutineArgs",
    "ReserveArgs",
    "age_args",
    "annotate_args",
    "check_run_key",
    "check_timers",
    "claim_due_args",
    "claim_manual_args",
    "finish_args",
    "list_routines_args",
    "list_runs_args",
    "mark_blocked_args",
    "put_routine_args",
    "record_args",
    "reindex_args",
    "reserve_args",
    "run_ref_args",
    "set_enabled_args",
    "set_paused_args",
    "spend_args",
    "submit_args",
    "running_of_args",
    "start_args",
    "transition_args",
]


def check_run_key(key: RunKey) -> RKey:
    """A run key (valid once built); returns the routine key tuple."""
    if not isinstance(key, RunKey):
        raise InvalidInput(f"key must be a RunKey, not {type(key).__name__}")
    return (key.org, key.uid, key.routine_id)


def run_ref_args(key: RunKey) -> RKey:
    """``get``: a run named by its key; returns the routine key tuple."""
    return check_run_key(key)


# ---------------------------------------------------------------------- routines


@dataclass(frozen=True)
class PutRoutineArgs:
    """``put_routine``'s checked input: ``schedule`` / ``definition`` are canonical JSON text;
    ``fields`` are the row values a registration writes (besides the bodies)."""

    key: RKey
    schedule: str
    definition: str
    now: datetime
    fields: Mapping[str, Any]


def put_routine_args(routine: Routine, now: datetime) -> PutRoutineArgs:
    if not isinstance(routine, Routine):
        raise InvalidInput(f"put_routine takes a Routine, not {type(routine).__name__}")
    key = check_routine_key(routine.scope, routine.routine_id)
    check_id("kind", routine.kind)
    check_id("config_revision", routine.config_revision)
    schedule = check_json("schedule", routine.schedule)
    definition = check_json("definition", routine.definition)
    now = require_utc("now", now)
    check_source(routine.source, routine.source_entry)
    fields = {
        "registered_at": require_utc("registered_at", routine.registered_at),
        "last_fire": check_utc("last_fire", routine.last_fire, optional=True),
        "next_due_at": check_utc("next_due_at", routine.next_due_at, optional=True),
        "tzdata_version": check_text("tzdata_version", routine.tzdata_version),
        "kind": routine.kind,
        "config_revision": routine.config_revision,
    }
    return PutRoutineArgs(key, schedule, definition, now, fields)


def set_enabled_args(
    scope: Scope, routine_id: str, now: datetime, next_due_at: datetime | None
) -> tuple[RKey, datetime, datetime | None]:
    """``set_enabled``: ``(key, now, next_due_at)``."""
    key = check_routine_key(scope, routine_id)
    return key, require_utc("now", now), check_utc("next_due_at", next_due_at, optional=True)


def set_paused_args(
    scope: Scope, routine_id: str, reason: str | None, now: datetime, next_due_at: datetime | None
) -> tuple[RKey, datetime, datetime | None]:
    """``set_paused``: the checks of :func:`set_enabled_args`, then the reason (an id) if any."""
    out = set_enabled_args(scope, routine_id, now, next_due_at)
    if reason is not None:
        check_new_id("reason", reason)  # a new text: no Unicode control or format character
    return out


# ---------------------------------------------------------------------- claims and transitions


@dataclass(frozen=True)
class ManualClaimArgs:
    key: RKey
    run_id: str
    now: datetime
    expires_at: datetime
    resend_at: datetime


def claim_manual_args(key: RunKey, now: datetime, expires_at: datetime, resend_at: datetime) -> ManualClaimArgs:
    rk = check_run_key(key)
    return ManualClaimArgs(
        rk,
        key.run_id,
        require_utc("now", now),
        require_utc("expires_at", expires_at),
        require_utc("resend_at", resend_at),
    )


def transition_args(key: RunKey, now: datetime) -> tuple[RKey, datetime]:
    """``start`` / ``begin_collecting``: ``(routine key, now)``."""
    rk = check_run_key(key)
    return rk, require_utc("now", now)


def running_of_args(owner: str, limit: int) -> tuple[str, int]:
    """``running_of``: ``(owner, limit)``; the owner as :func:`check_owner` accepts it, the limit an
    integer of at least 0."""
    if check_limit("limit", limit) != limit:
        raise InvalidInput("limit must be an integer of at least 0")
    return check_owner(owner), limit


def start_args(
    key: RunKey, now: datetime, owner: str | None, in_window: bool = False
) -> tuple[RKey, datetime, str | None]:
    """``start``: ``(routine key, now, owner)``; the owner None or :func:`check_owner`'s;
    ``in_window`` a bool."""
    rk, now = transition_args(key, now)
    if not isinstance(in_window, bool):
        raise InvalidInput(f"in_window must be true or false, not {type(in_window).__name__}")
    return rk, now, None if owner is None else check_owner(owner)


def submit_args(
    key: RunKey,
    now: datetime,
    batch_id: str | None,
    deadline: datetime,
    next_poll_at: datetime,
    target_task_id: str | None,
) -> tuple[datetime, dict[str, Any]]:
    """``submit``: ``(now, the run values the CAS writes besides state and state_at)``."""
    _, now = transition_args(key, now)
    values = {
        "submitted_at": now,
        "batch_id": check_text("batch_id", batch_id),
        "target_task_id": check_text("target_task_id", target_task_id),
        "deadline": require_utc("deadline", deadline),
        "next_poll_at": require_utc("next_poll_at", next_poll_at),
        "poll_attempts": 0,
    }
    return now, values


def annotate_args(key: RunKey, values: Mapping[str, Any]) -> tuple[RKey, dict[str, Any]]:
    """``annotate``: only :data:`ANNOTATABLE` fields; ``caps_crossed`` comes back as a tuple."""
    rk = check_run_key(key)
    if not isinstance(values, Mapping) or not all(isinstance(name, str) for name in values):
        raise InvalidInput("annotate takes a mapping of field names to values")
    unknown = sorted(set(values) - ANNOTATABLE)
    if unknown:
        raise InvalidInput(f"annotate cannot write {', '.join(unknown)}")
    clean: dict[str, Any] = {}
    for name, value in values.items():
        if name == "caps_crossed":
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise InvalidInput("caps_crossed must be a sequence of texts")
            clean[name] = tuple(check_text(name, v, optional=False) for v in value)
        elif name == "cost_micros":
            clean[name] = check_micros(name, value)
        elif name == "erase_at":
            clean[name] = check_utc(name, value, optional=True)
        else:
            clean[name] = check_text(name, value)
    return rk, clean


@dataclass(frozen=True)
class FinishArgs:
    """``finish``'s checked input: ``allowed`` is the states the run may leave; ``cost`` is None
    when the result carries no cost (the run's own cost stands)."""

    rk: RKey
    now: datetime
    allowed: frozenset[str]
    cost: int | None
    error_class: str | None


def finish_args(key: RunKey, result: RunResult, now: datetime, from_states: Collection[str] | None) -> FinishArgs:
    rk, now = transition_args(key, now)
    if not isinstance(result, RunResult):
        raise InvalidInput(f"finish takes a RunResult, not {type(result).__name__}")
    if not isinstance(result.outcome, str) or result.outcome not in TERMINAL:
        raise InvalidInput(f"finish needs a terminal outcome, not {result.outcome!r}")
    check_reason("reason", result.reason)
    allowed = check_from_states(result.outcome, from_states)
    cost = None if result.cost_micros is None else check_micros("cost_micros", result.cost_micros)
    return FinishArgs(rk, now, allowed, cost, check_text("error_class", result.error_class))


def record_args(
    key: RunKey, outcome: str, reason: str, now: datetime, cost_micros: int | None = None
) -> tuple[RKey, datetime, int | None]:
    """``record``: ``(routine key, now, cost)``; the outcome is terminal, the reason a known code,
    the cost (None = the stored one) integer micro-USD."""
    rk = check_run_key(key)
    now = require_utc("now", now)
    if not isinstance(outcome, str) or outcome not in TERMINAL:
        raise InvalidInput(f"record needs a terminal outcome, not {outcome!r}")
    check_reason("reason", reason, optional=False)
    cost = None if cost_micros is None else check_micros("cost_micros", cost_micros)
    return rk, now, cost


def mark_blocked_args(key: RunKey, why: str, now: datetime, cost_micros: int | None) -> tuple[RKey, datetime, int]:
    """``mark_blocked``: ``(routine key, now, cost floor)``; ``why`` one of :data:`BLOCKED_WHY`,
    the cost (None = leave it) integer micro-USD (returned as 0 then: the stored cost is its floor)."""
    rk = check_run_key(key)
    if not isinstance(why, str) or why not in BLOCKED_WHY:
        shown = repr(why) if isinstance(why, str) and len(why) <= 40 else type(why).__name__
        raise InvalidInput(f"why must be one of {', '.join(sorted(BLOCKED_WHY))}, not {shown}")
    now = require_utc("now", now)
    cost = 0 if cost_micros is None else check_micros("cost_micros", cost_micros)
    return rk, now, cost


# ---------------------------------------------------------------------- money and reads


@dataclass(frozen=True)
class ReserveArgs:
    """``reserve``'s checked input: ceiling ``keys`` in the order given, ``limits`` by key."""

    rk: RKey
    amount: int
    keys: list[str]
    limits: dict[str, int]


def reserve_args(key: RunKey, day: str, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveArgs:
    rk = check_run_key(key)
    check_id("day", day)
    amount = check_micros("amount_micros", amount_micros)
    if (
        isinstance(ceilings, str)
        or not isinstance(ceilings, Sequence)
        or not all(isinstance(c, Ceiling) for c in ceilings)
    ):
        raise InvalidInput("ceilings must be a sequence of Ceiling")
    keys = [check_id("ceiling", c.key) for c in ceilings]
    limits = {c.key: check_micros("limit_micros", c.limit_micros) for c in ceilings}
    if len(set(keys)) != len(keys):
        raise InvalidInput("a ceiling is listed twice")
    return ReserveArgs(rk, amount, keys, limits)


def spend_args(ceiling_key: str, day: str) -> tuple[str, str]:
    """``spend``: a ceiling key and a day, both text."""
    return check_text("ceiling_key", ceiling_key, optional=False) or "", check_text("day", day, optional=False) or ""


def claim_due_args(
    now: datetime, limit: int, decide: Any, timers: Timers, scan: Any = None, staging: Any = None
) -> tuple[datetime, int]:
    """``claim_due``: ``(now, limit)``; ``decide`` is callable, ``timers`` a :class:`Timers`,
    ``scan`` a :class:`~alma_schedule.model.ClaimScan` or None and ``staging`` callable or None."""
    if not callable(decide):
        raise InvalidInput("claim_due needs a callable decide")
    if staging is not None and not callable(staging):
        raise InvalidInput(f"staging must be callable or None, not {type(staging).__name__}")
    if scan is not None and not isinstance(scan, ClaimScan):
        raise InvalidInput(f"scan must be a ClaimScan or None, not {type(scan).__name__}")
    check_timers(timers)
    return require_utc("now", now), check_limit("limit", limit)


def check_timers(timers: Timers) -> Timers:
    """The timers a writing system call is given (``take_resends``, ``take_polls``, ``finish``)."""
    if not isinstance(timers, Timers):
        raise InvalidInput(f"timers must be a Timers, not {type(timers).__name__}")
    return timers


def reindex_args(derive: Any, tzdata_version: str | None, batch: int) -> int:
    """``reindex``: ``derive`` is callable, the zone data version text; returns the page size."""
    if not callable(derive):
        raise InvalidInput("reindex needs a callable derive")
    check_text("tzdata_version", tzdata_version)
    return max(check_limit("batch", batch), 1)


def list_routines_args(scope: Scope, limit: int, after: str | None) -> tuple[int, str | None]:
    """``list_routines``: ``(limit, after)``; ``after`` is a routine id's text (any text pages)."""
    check_scope(scope)
    return check_limit("limit", limit), check_text("after", after)


def list_runs_args(
    scope: Scope,
    routine_id: str | None,
    state: str | None,
    since: datetime | None,
    before: tuple[datetime, str] | tuple[datetime, str, str] | None,
    limit: int = 100,
) -> tuple[datetime | None, tuple[datetime, str] | tuple[datetime, str, str] | None, int]:
    """``list_runs``: ``(since, before, limit)`` with their datetimes in UTC; ``before`` is the
    ledger key ``(fire_at, run_id, routine_id)`` of the last row shown (any text), or a
    ``(fire_at, run_id)`` pair: every row before that pair, whatever its routine."""
    check_scope(scope)
    if routine_id is not None:
        check_id("routine_id", routine_id)
    if state is not None and (not isinstance(state, str) or state not in ALL_STATES):
        raise InvalidInput(f"unknown run state {state!r}")
    since = check_utc("since", since, optional=True)
    edge = None
    if before is not None:
        if not isinstance(before, tuple) or len(before) not in (2, 3):
            raise InvalidInput("before must be a (fire_at, run_id, routine_id) triple or a (fire_at, run_id) pair")
        at, run = require_utc("before", before[0]), check_text("before", before[1], optional=False) or ""
        edge = (at, run) if len(before) == 2 else (at, run, check_text("before", before[2], optional=False) or "")
    return since, edge, check_limit("limit", limit)


def age_args(
    name: str, now: datetime, span: timedelta, limit: int, *, times: int = 1
) -> tuple[datetime, datetime, int]:
    """``blocked`` / ``stuck``: ``(now, now - times * span, limit)``; ``span`` (named ``name``) is a
    non-negative timedelta, and a cutoff reaching before :data:`MIN_INSTANT` reads from it."""
    now = require_utc("now", now)
    if not isinstance(span, timedelta) or span < timedelta(0):
        raise InvalidInput(f"{name} must be a non-negative timedelta")
    cutoff = MIN_INSTANT if span >= (now - MIN_INSTANT) / times else now - span * times
    return now, cutoff, check_limit("limit", limit)
