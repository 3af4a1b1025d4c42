"""What every answer of serve-http carries, and what a dashboard write must show.

docs/architecture.md, section "The modules, in detail" (dashboard/guard.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from alma_schedule.setting_values import origin_parts

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["CSP", "SECURITY_HEADERS", "SecurityHeaders", "cross_site", "own_origin", "store_down"]

log = logging.getLogger(__name__)

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
_NAMES = frozenset(name for name, _ in SECURITY_HEADERS)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every HTTP response (replacing any of the same name)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", ()) if bytes(k).lower() not in _NAMES]
                message = {**message, "headers": [*kept, *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


Origin = tuple[str, str, int]


def own_origin(configured: str | None, scheme: str, host: str | None) -> Origin | None:
    """The dashboard's origin: ``ALMA_DASHBOARD_ORIGIN``, else the request's scheme and Host header."""
    if configured:
        return origin_parts(configured)
    return origin_parts(f"{scheme}://{host}") if host else None


def cross_site(headers: Mapping[str, str], own: Origin | None) -> str | None:
    """Why a write is refused (its Origin or Referer names another origin), or None."""
    origin = headers.get("origin")
    if origin is not None and origin.strip().lower() == "null":
        origin = None  # names no site: what a browser sends under our own Referrer-Policy: no-referrer
    if origin is not None:
        named, what = origin, "Origin"
    else:
        referer = headers.get("referer")
        if referer is None:
            return None  # neither: the CSRF token decides
        named, what = referer, "Referer"
    seen = origin_parts(named)
    if seen is None or own is None or seen != own:
        return f"refused: the request's {what} is not this dashboard's origin (ALMA_DASHBOARD_ORIGIN)"
    return None


def store_down(request: Request, exc: Exception) -> Response:
    """503, one line; the log one line naming the request and the error's type."""
    from starlette.responses import PlainTextResponse

    log.warning("%s %s: the store is unavailable (%s)", request.method, request.url.path, type(exc).__name__)
    return PlainTextResponse("the store is unavailable", status_code=503)
