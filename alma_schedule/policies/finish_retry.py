"""The owner's back-off while its finish cannot reach the store (issue 14).

The owner of a ``running`` run (the process that won ``claimed -> running``) is the only writer of
its finish: no duplicate is possible, so it may retry its own finish CAS while the store is
unreachable (``StoreUnavailable``), until its time is up (the run's soft time limit). A retry that
loses the CAS reads the row it gets back: a row that already shows this result is the earlier
commit whose outcome was unknown (done); any other state is the operator's ``record`` (the loser's
usual path).

The schedule, as a pure function of the attempt number and the time left: ``FIRST`` seconds, then
doubling, at most ``CAP`` seconds, never past the budget. No jitter: one owner retries one row.
"""

from __future__ import annotations

__all__ = ["CAP", "FIRST", "retry_delay"]

#: The first wait, in seconds.
FIRST = 0.1
#: The longest wait between two attempts, in seconds.
CAP = 2.0


def retry_delay(attempt: int, remaining: float) -> float | None:
    """Seconds to wait before retry number ``attempt`` (1 = the first retry) with ``remaining``
    seconds left before the soft time limit; None when no time is left (give up: re-raise)."""
    if attempt < 1:
        raise ValueError("attempt counts from 1")
    if remaining <= 0:
        return None
    delay: float = min(CAP, FIRST * float(2 ** min(attempt - 1, 32)))
    return min(delay, remaining)
