"""The engine's planning: :mod:`alma_schedule.policies.plan` (``decide`` and its helpers, re-exported
here) and :func:`planner`, the tick's :class:`~alma_schedule.policies.plan.Plan` for a runtime."""

from __future__ import annotations

from datetime import datetime

from alma_schedule.policies.plan import (
    Plan,
    claims_left,
    decide,
    describe_error,
    due_of,
    jitter_of,
    policy_for,
    schedule_of,
    window_end,
)

from .runtime import Runtime

__all__ = [
    "Plan",
    "claims_left",
    "decide",
    "describe_error",
    "due_of",
    "jitter_of",
    "planner",
    "policy_for",
    "schedule_of",
    "window_end",
]


def planner(runtime: Runtime, now: datetime) -> Plan:
    """The tick's plan at ``now``: ``decide`` with ``runtime``'s settings, each routine's runner
    resolved first (a routine no runner serves is deferred)."""
    return Plan(now, runtime.settings, runtime.resolve)
