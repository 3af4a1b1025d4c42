"""The retention of run history, a step of the tick's maintenance (``run_retention``): at most
``claim_limit`` of the oldest terminal runs ended more than ``run_retention`` ago deleted per tick
(``Store.prune_runs``, which raises ``pruned_through`` with the delete), and only when it can have
anything to do: the setting on, and once every :data:`PRUNE_EVERY` of the tick's time unless the
last batch was full (a backlog is worked off one batch a tick).
docs/architecture.md, section "The modules, in detail" (engine/retention.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from .runtime import RetentionCheck, Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["PRUNE_EVERY", "RetentionCheck", "due", "prune_runs", "wanted"]

#: How often a process's ticks prune when the last batch was not full: a retention is at least a
#: day, so the ledger outgrows its bound by at most this much of its fires.
PRUNE_EVERY = timedelta(minutes=5)


def due(check: RetentionCheck, at: datetime) -> bool:
    """Whether a tick at ``at`` prunes: never before, after a full batch, at least :data:`PRUNE_EVERY`
    since the last prune, or when the tick's time went back before it (simulated time, a new clock)."""
    last = check.last_at
    return last is None or check.full or not last <= at < last + PRUNE_EVERY


def wanted(rt: Runtime, at: datetime) -> bool:
    """Whether a tick at ``at`` has the prune's store step to run (the setting on, :func:`due`)."""
    return rt.settings.run_retention is not None and due(rt.retention, at)


def prune_runs(rt: Runtime, at: datetime, run: Callable[[Callable[[], int]], int | None]) -> int:
    """The tick's step: delete what :func:`due` allows, through ``run`` (the tick's maintenance
    wrapper: a failure is reported, never raised). Returns how many runs went (0 when off or not due)."""
    s = rt.settings
    keep = s.run_retention
    if keep is None:
        return 0
    check = rt.retention
    with check.lock:
        if not due(check, at):
            return 0
        check.last_at, check.full = at, False
    before, limit = at - keep, s.claim_limit
    count = run(lambda: rt.store.prune_runs(before, limit))
    with check.lock:
        check.full = count is not None and count >= limit
    if count:
        log.info("tick %s: %d run(s) pruned (run_retention %s)", at.isoformat(), count, keep)
    return count or 0
