"""The retention of the audit trail, a step of the tick's maintenance (``event_retention``): at most
``claim_limit`` of the oldest ``routine_events`` older than ``event_retention`` deleted per tick
(``Store.prune_events``: ONE bounded statement), and nothing at all while the setting is off.
docs/architecture.md, section "The modules, in detail" (engine/event_retention.py).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["prune_events", "wanted"]


def wanted(rt: Runtime) -> bool:
    """Whether the tick has the prune to run (``event_retention`` is set)."""
    return rt.settings.event_retention is not None


def prune_events(rt: Runtime, at: datetime) -> int:
    """Delete up to ``claim_limit`` events older than ``at - event_retention`` (0 when off)."""
    keep = rt.settings.event_retention
    if keep is None:
        return 0
    count = rt.store.prune_events(at - keep, rt.settings.claim_limit)
    if count:
        log.info("tick %s: %d audit event(s) pruned (event_retention %s)", at.isoformat(), count, keep)
    return count
