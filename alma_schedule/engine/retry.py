"""The owner's finish, retried while the store is unreachable (issue 14).

The process that won ``claimed -> running`` is the only one that may finish its run from
``running`` (the operator's ``record`` aside), so it may retry its own finish CAS with back-off while
the store raises :class:`~alma_schedule.errors.StoreUnavailable`: no duplicate is possible. It
retries until the run's soft time limit (``run_time_limit`` after its start, by the time source),
waiting :func:`~alma_schedule.policies.finish_retry.retry_delay` between attempts through the
injected ``sleep`` (the Celery task passes :func:`time.sleep`; without one there is no retry). The
engine takes no time decision of its own: the instants come from the time source, the waits from
the pure schedule.

A commit whose outcome was unknown (the connection dropped after the statement was sent) is settled
by the row the next attempt reads: a lost CAS whose row already shows this result (state and
reason) is the earlier commit: done. Any other loser is the operator's ``record``, as without retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime

from alma_schedule.errors import StoreUnavailable
from alma_schedule.model import ClaimResult, RunKey, RunResult
from alma_schedule.policies.finish_retry import retry_delay

from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Sleep", "finish_as_owner"]

#: Waits the given number of seconds (``time.sleep``; a test's clock advancer).
Sleep = Callable[[float], None]


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
    attempt = 0
    while True:
        try:
            res = rt.store.finish(key, result, now=now, timers=rt.timers, from_states=from_states)
        except StoreUnavailable as exc:
            if sleep is None:
                raise
            attempt += 1
            limit = started + rt.settings.run_time_limit
            delay = retry_delay(attempt, (limit - rt.now(None)).total_seconds())
            if delay is None:
                log.error("finish %s as %s: the store is still unavailable at the soft time limit", key, result.outcome)
                raise
            log.warning("finish %s as %s: %s; retry %d in %.2fs", key, result.outcome, exc, attempt, delay)
            sleep(delay)
            continue
        if attempt and _settled(res, result):
            log.info("finish %s: the row already shows %s: an earlier attempt committed", key, result.outcome)
            return ClaimResult(True, res.record, "won")
        return res
