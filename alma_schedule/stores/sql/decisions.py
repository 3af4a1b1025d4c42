"""A routine's claim decision as the SQL store takes it: the tick's :class:`~alma_schedule.policies.plan.Plan`
answers as they are; any other ``decide`` (a library user's) validated (instants aware UTC, ids well
formed), anything it raises or a bad answer turned into a ``Defer`` with back-off; the error text
cleaned for the column; a batch's decisions, taken as its locked rows arrive, sorted
for the claim's statements (:class:`Decided`, :func:`decide_rows`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import ClaimScan, Defer, Deferral, DueKey, Fire, NotDue, Routine, check_id
from alma_schedule.policies import backoff
from alma_schedule.policies.plan import Plan
from alma_schedule.settings import Timers
from alma_schedule.stores.validation import check_collided, check_missed, check_utc, require_utc

__all__ = ["Decided", "Decision", "clean_error", "decide_checked", "decide_rows", "opening"]

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
            check_missed(d.fires_missed)
            if d.collided:  # a calendar's collided fires (rare): normalised where they are not aware UTC
                collided = check_collided(d.collided, _utc("fire_at", d.fire_at))
                if any(a is not b for a, b in zip(collided, d.collided, strict=True)):
                    d = dataclasses.replace(d, collided=collided)
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


@dataclass
class Decided:
    """One claim batch's locked routines, in due order, and ``decide``'s answers sorted for the claim's
    statements: the fires to record (``row_addresses``: each one's routine row's ctid, when the rows
    carry one), the ``NotDue`` index moves, the ``Defer`` back-offs (rows and reports); and the fires
    those fires collapse, by routine kind (``missed``: none on a steady tick)."""

    due: list[Routine] = field(default_factory=list)
    fires: list[tuple[Routine, Fire]] = field(default_factory=list)
    row_addresses: list[str] = field(default_factory=list)
    not_due: list[dict[str, Any]] = field(default_factory=list)
    defers: list[dict[str, Any]] = field(default_factory=list)
    deferred: list[Deferral] = field(default_factory=list)
    missed: dict[str, int] = field(default_factory=dict)


def decide_rows(
    chunks: Iterable[Sequence[Any]],
    build: Callable[[Sequence[Any]], list[Routine]],
    decide: Callable[[Routine], Any],
    now: datetime,
    timers: Timers,
    *,
    addressed: bool,
    locked: Callable[[list[Routine]], None] | None = None,
) -> Decided:
    """Each row of ``chunks`` (the locked due rows, in due order, in chunks as they arrive: the first
    are decided while the database still sends the others) built into its routine (``build``, a
    chunk at a time) and decided (:func:`decide_checked`); ``addressed``: each row's last column is
    its address (PostgreSQL's ``ctid``); ``locked`` is told the routines locked so far before each
    chunk is decided. A fire at or before the routine's ``last_fire`` is dropped."""
    out = Decided()
    checked: dict[int, Fire] = {}  # the Fire objects found valid (decide's answers are shared)
    trusted = isinstance(decide, Plan)  # the tick's own plan: its answers are not re-checked
    for rows in chunks:
        routines = build(rows)
        out.due.extend(routines)
        if locked is not None:
            locked(out.due)
        for routine, row in zip(routines, rows, strict=True):
            dec = decide(routine) if trusted else decide_checked(decide, routine, now, timers, checked)
            if isinstance(dec, Fire):
                if routine.last_fire is None or routine.last_fire < dec.fire_at:
                    out.fires.append((routine, dec))
                    if addressed:
                        out.row_addresses.append(row[-1])
                    if dec.fires_missed:
                        out.missed[routine.kind] = out.missed.get(routine.kind, 0) + dec.fires_missed
                continue
            rk = {"org": routine.org, "uid": routine.uid, "routine_id": routine.routine_id}
            if isinstance(dec, Defer):
                error = clean_error(dec.error)
                out.defers.append({**rk, "until": dec.until, "error": error})
                first = backoff.first_deferral(routine.error_count)
                out.deferred.append(Deferral(rk["org"], rk["uid"], rk["routine_id"], dec.until, error, first=first))
            elif isinstance(dec, NotDue):
                out.not_due.append({**rk, "next_due_at": dec.next_due_at})
    return out


def opening(scan: ClaimScan | None, token: int) -> Callable[[list[Routine]], None] | None:
    """What records in ``scan`` the rows a batch locked so far (before they are decided, so that the
    scan's other batches leave them to it from the moment they arrive): each row's due key made once."""
    if scan is None:
        return None
    keys: list[DueKey] = []
    seen = [0]

    def locked(due: list[Routine]) -> None:
        keys.extend((r.next_due_at, r.org, r.uid, r.routine_id) for r in due[seen[0] :] if r.next_due_at)
        seen[0] = len(due)
        scan.open(token, list(keys))

    return locked
