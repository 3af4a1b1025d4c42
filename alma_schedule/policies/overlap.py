"""Overlap ``latest``: the routine's one buffered fire (``docs/architecture.md``, the run state table).

A routine whose schedule says ``overlap: latest`` (``decide`` sets ``Fire.buffer``) does not drop a
fire that comes due while its active run blocks (``running``, ``submitted``, ``collecting``, or a
``claimed`` manual run): the fire waits as a ``buffered`` row. At most one per routine (a partial
unique index): a newer fire REPLACES it, the old row ending ``skipped(overlap)`` (Temporal's
BUFFER_ONE keeps the first; keeping the latest is what "missed fires are not replayed" wants).

* A buffered row keeps its fire's normal window (``expires_at``): if the window closes before it is
  released, the tick's expiry sweep records it ``skipped(missed)``, like a ``claimed`` fire.
* The transaction that moves the routine's open run to ANY terminal state RELEASES the buffered
  row: ``buffered -> claimed`` while its window is open (else ``skipped(missed)``). The caller
  sends it after the commit; a failed send is re-sent by a tick (``resend_at``).
* A buffered row's ``resend_at`` holds the first re-send instant its claim would have had; a
  release keeps that delay from the release instant (:func:`released_resend_at`).
* Never two at once: the released row becomes the routine's open run only after the active one
  left the one-open-run index, in the same transaction.
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
    blocks can (a ``claimed`` SCHEDULE fire is superseded by a newer fire, never buffered behind),
    so the expiry sweep looks for one only behind the others (manual runs)."""
    return origin != "schedule"
