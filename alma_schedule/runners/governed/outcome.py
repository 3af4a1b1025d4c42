"""Did the provider request leave? The closed list of failures that prove it never did, and the one
function that decides (money never under-counted).

docs/architecture.md, section "The modules, in detail" (runners/governed/outcome.py).
"""

from __future__ import annotations

from alma_schedule.errors import ProviderError

__all__ = ["CONNECT", "NEVER_LEFT_PHASES", "NOT_SENT", "POOL", "REQUEST_TIMEOUT", "request_never_left"]

#: The connection was never established (refused, DNS, TLS handshake): nothing was sent.
CONNECT = "connect"
#: No connection could be taken from the pool in time: nothing was sent.
POOL = "pool"
#: The adapter did not send the billable request at all.
NOT_SENT = "not_sent"
#: The closed list of phases after which the request provably never left.
NEVER_LEFT_PHASES: frozenset[str] = frozenset({CONNECT, POOL, NOT_SENT})
#: HTTP 408: the provider timed out reading the request; it may have started on it (uncertain).
REQUEST_TIMEOUT = 408


def request_never_left(exc: BaseException) -> bool:
    """True only when ``exc`` proves the provider request never left (or was refused with a 4xx
    other than 408): the one case a failed provider call may end at cost 0."""
    if not isinstance(exc, ProviderError):
        return False
    status = exc.status_code
    if status is not None:
        return 400 <= status < 500 and status != REQUEST_TIMEOUT
    return exc.phase in NEVER_LEFT_PHASES
