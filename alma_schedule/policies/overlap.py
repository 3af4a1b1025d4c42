"""Overlap ``latest``: the routine's one buffered fire (``docs/architecture.md``, the run state table).

docs/architecture.md, section "The modules, in detail" (policies/overlap.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.model import Reason, RunState

__all__ = [
    "BUFFER_STATE",
    "EXPIRED",
    "LATEST",
    "REPLACED",
    "buffers",
    "release",
    "released_resend_at",
    "releases_on_expiry",
]

#: The overlap mode that buffers (``policy_of(schedule).overlap``); ``skip`` is the default.
LATEST = "latest"
BUFFER_STATE = RunState.BUFFERED
#: ``(state, reason)`` of a buffered row a newer fire replaces; of one whose window closed.
REPLACED: tuple[RunState, Reason] = (RunState.SKIPPED, Reason.OVERLAP)
EXPIRED: tuple[RunState, Reason] = (RunState.SKIPPED, Reason.MISSED)


def buffers(overlap: str) -> bool:
    """Whether a routine with this ``overlap`` mode buffers a blocked fire."""
    return overlap == LATEST


def release(expires_at: datetime, now: datetime) -> tuple[RunState, Reason | None]:
    """Where a buffered row goes when the active run ends at ``now``: ``claimed`` inside its window,
    ``skipped(missed)`` once the window has closed (``now >= expires_at``, the expiry rule)."""
    if now >= expires_at:
        return EXPIRED
    return RunState.CLAIMED, None


def released_resend_at(resend_at: datetime | None, claimed_at: datetime, now: datetime) -> datetime:
    """The ``resend_at`` of a row released at ``now``: the delay its claim had (``resend_at -
    claimed_at``), from ``now``; ``now`` when it had none."""
    if resend_at is None:
        return now
    return now + max(resend_at - claimed_at, timedelta(0))


def releases_on_expiry(origin: str) -> bool:
    """Whether an expiring ``claimed`` row may have a buffered fire behind it. Only a row that
    blocks can (a ``claimed`` schedule fire is superseded by a newer fire, never buffered behind),
    so the expiry sweep looks for one only behind the others (manual runs)."""
    return origin != "schedule"
