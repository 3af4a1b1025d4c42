"""Did the provider request leave? The closed list of failures that prove it never did, and the ONE
function that decides (issue 14, money never under-counted).

A provider call that fails may still have been billed: the request may have reached the provider
(a connection reset after the body was sent, a 5xx or 408 from a gateway, a read timeout, a soft
or hard time limit during the call, an answer we could not read). Such an outcome is UNCERTAIN:
the governed runners leave the run ``running`` with ``cost_micros`` at its whole hard bound (written
before the call) and the engine marks it blocked at once (``BlockedWhy.UNCERTAIN_OUTCOME``), for
the operator's ``runs record ... --cost-usd``. Only the failures below may end a run with cost 0:

* the connection was never established: connection refused, DNS failure, TLS failure before the
  request was sent (phase ``connect``; httpx's ``ConnectError``);
* no pooled connection was free in time (phase ``pool``; httpx's ``PoolTimeout``);
* the adapter sent nothing billable (phase ``not_sent``: a bound that cannot pay for the input, a
  batch whose input upload failed before the batch was created);
* the provider answered an HTTP 4xx other than 408 (it refused the request: 400, 401, 403, 404,
  409, 413, 422, 429, ...).

Anything else (another exception type, a ``ProviderError`` without those facts) may have reached
the provider. Adapters report the facts on :class:`~alma_schedule.errors.ProviderError`
(``phase``, ``status_code``); they never decide.
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
