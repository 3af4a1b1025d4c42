"""The owner's back-off while its finish cannot reach the store.

docs/architecture.md, section "The modules, in detail" (policies/finish_retry.py).
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
