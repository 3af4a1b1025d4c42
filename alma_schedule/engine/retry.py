"""The owner's store calls, retried while the store is unreachable.

docs/architecture.md, section "The modules, in detail" (engine/retry.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime
from typing import TypeVar

from alma_schedule.errors import StoreUnavailable
from alma_schedule.model import ClaimResult, RunKey, RunResult, RunState
from alma_schedule.policies.finish_retry import retry_delay
from alma_schedule.policies.ownership import owned_by

from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Sleep", "as_owner", "collect_as_owner", "finish_as_owner", "start_as_owner"]

#: Waits the given number of seconds (``time.sleep``; a test's clock advancer).
Sleep = Callable[[float], None]
T = TypeVar("T")


def as_owner(rt: Runtime, what: str, call: Callable[[], T], *, started: datetime, sleep: Sleep | None) -> T:
    """``call()``, retried with the finish back-off while it raises ``StoreUnavailable``, until the soft
    time limit counted from ``started`` (no ``sleep``: no retry)."""
    attempt = 0
    while True:
        try:
            return call()
        except StoreUnavailable as exc:
            if sleep is None:
                raise
            attempt += 1
            delay = retry_delay(attempt, (started + rt.settings.run_time_limit - rt.now(None)).total_seconds())
            if delay is None:
                log.error("%s: the store is still unavailable at the soft time limit", what)
                raise
            log.warning("%s: %s; retry %d in %.2fs", what, exc, attempt, delay)
            sleep(delay)


def _own(res: ClaimResult, state: str, owner: str) -> ClaimResult:
    """A CAS retried after an unknown outcome that lost to a row in ``state`` with this owner lost to
    its own first attempt (committed meanwhile): that is a win."""
    rec = res.record
    if not res.won and rec is not None and rec.state == state and owned_by(rec.owner, owner):
        return ClaimResult(True, rec, "won")
    return res


def _take_as_owner(
    rt: Runtime,
    key: RunKey,
    what: str,
    cas: Callable[[], ClaimResult],
    edge: tuple[str, str],
    *,
    now: datetime,
    owner: str | None,
    sleep: Sleep | None,
) -> ClaimResult:
    """``cas()`` (the edge ``edge = (from, to)`` writing ``owner``); one whose outcome is unknown is
    settled by the row: ``to`` with this owner -> won; still ``from`` -> the CAS again; else lost.
    Without ``owner`` or ``sleep`` it raises as the store does."""
    waiting, taken = edge
    try:
        return cas()
    except StoreUnavailable:
        if owner is None or sleep is None:
            raise
        log.warning("%s %s: outcome unknown (store unavailable); settling it by the row", what, key)
    while True:
        row = as_owner(rt, f"{what} {key}: reading the row", lambda: rt.store.get(key), started=now, sleep=sleep)
        if row is None:
            return ClaimResult(False, None, "not_found")
        if row.state == taken and owned_by(row.owner, owner):
            log.info("%s %s: the earlier attempt committed: this request owns the run", what, key)
            return ClaimResult(True, row, "won")
        if row.state != waiting:
            return ClaimResult(False, row, "duplicate")
        try:  # the first attempt may still be committing: this CAS then waits for it and loses to it
            return _own(cas(), taken, owner)
        except StoreUnavailable:
            continue  # unknown again: read the row again (as_owner gives up at the soft time limit)


def start_as_owner(rt: Runtime, key: RunKey, *, now: datetime, owner: str | None, sleep: Sleep | None) -> ClaimResult:
    """``store.start`` (inside the run's window) by the would-be owner, settled by the row when its
    outcome is unknown (:func:`_take_as_owner`, the module docstring)."""
    return _take_as_owner(
        rt,
        key,
        "start",
        lambda: rt.store.start(key, now=now, owner=owner, in_window=True),
        (RunState.CLAIMED, RunState.RUNNING),
        now=now,
        owner=owner,
        sleep=sleep,
    )


def collect_as_owner(rt: Runtime, key: RunKey, *, now: datetime, owner: str | None, sleep: Sleep | None) -> ClaimResult:
    """``store.begin_collecting`` by a collector, settled by the row as a start is."""
    return _take_as_owner(
        rt,
        key,
        "collect",
        lambda: rt.store.begin_collecting(key, now=now, owner=owner),
        (RunState.SUBMITTED, RunState.COLLECTING),
        now=now,
        owner=owner,
        sleep=sleep,
    )


def _settled(res: ClaimResult, result: RunResult) -> bool:
    """A lost CAS whose row already shows ``result``: the commit of an earlier attempt."""
    rec = res.record
    return not res.won and rec is not None and rec.state == result.outcome and rec.reason == result.reason


def finish_as_owner(
    rt: Runtime,
    key: RunKey,
    result: RunResult,
    *,
    now: datetime,
    started: datetime,
    from_states: Collection[str],
    sleep: Sleep | None,
) -> ClaimResult:
    """``store.finish`` by the run's owner; retried (see the module docstring) when ``sleep`` is given."""
    attempts = 0

    def finish() -> ClaimResult:
        nonlocal attempts
        attempts += 1
        return rt.store.finish(key, result, now=now, timers=rt.timers, from_states=from_states)

    res = as_owner(rt, f"finish {key} as {result.outcome}", finish, started=started, sleep=sleep)
    if attempts > 1 and _settled(res, result):
        log.info("finish %s: the row already shows %s: an earlier attempt committed", key, result.outcome)
        return ClaimResult(True, res.record, "won")
    return res
