"""The limits ``serve-http`` runs under: uvicorn's own, and a deadline in front of the app.

docs/architecture.md, section "The modules, in detail" (http_limits.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = [
    "LIMIT_CONCURRENCY",
    "MAX_HEAD_BYTES",
    "REQUEST_DEADLINE",
    "TIMEOUT_KEEP_ALIVE",
    "RequestDeadline",
    "uvicorn_options",
]

log = logging.getLogger(__name__)

LIMIT_CONCURRENCY = 100
TIMEOUT_KEEP_ALIVE = 5
MAX_HEAD_BYTES = 16 * 1024
REQUEST_DEADLINE = 30.0

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class RequestDeadline:
    """ASGI middleware: an HTTP request not answered within ``seconds`` is answered 503 (or, once
    its answer has begun, its connection closed), logged in one line."""

    def __init__(self, app: App, seconds: float = REQUEST_DEADLINE) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import anyio

        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        with anyio.move_on_after(self.seconds) as deadline:
            await self.app(scope, receive, tracked)
        if not deadline.cancelled_caught:
            return
        log.warning(
            "%s %s: no answer within %g s (request deadline)", scope.get("method"), scope.get("path"), self.seconds
        )
        if started:
            return  # an answer begun and not ended: the server closes the connection
        body = b"the request took too long\n"
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 503, "headers": [*headers, (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def uvicorn_options(*, host: str, port: int, log_level: str) -> dict[str, Any]:
    """The keywords of ``uvicorn.run`` / ``uvicorn.Config`` serve-http runs with."""
    return {
        "host": host,
        "port": port,
        "log_level": log_level,
        "http": "h11",
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        "limit_concurrency": LIMIT_CONCURRENCY,
        "timeout_keep_alive": TIMEOUT_KEEP_ALIVE,
        "proxy_headers": False,
        "server_header": False,
    }
