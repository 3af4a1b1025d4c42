"""A local webhook receiver (an ASGI app, starlette) that verifies signatures, for tests and the demo.
docs/architecture.md, section "The modules, in detail" (testing/webhook_receiver.py).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from alma_schedule.model.time import system_time
from alma_schedule.runners.adapters.webhook import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify_signature,
)
from alma_schedule.settings import Secret


@dataclass(frozen=True, slots=True)
class Received:
    """One request: its path, headers (lower-case names), raw body, and whether it verified."""

    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool
    status: int

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get(IDEMPOTENCY_HEADER.lower())


class WebhookReceiver:
    """Records deliveries; ``deliveries`` are the accepted (verified, 2xx) ones."""

    def __init__(self, secret: Secret | str | None = None, *, status: int = 204) -> None:
        self.secret = secret
        self.status = status
        self.received: list[Received] = []
        self._stalls = 0
        self._stall_seconds = 0.0
        self._lock = threading.Lock()
        self.app = Starlette(routes=[Route("/{path:path}", self._hook, methods=["POST"])])

    def stall_next(self, times: int = 1, *, seconds: float = 5.0) -> None:
        """The next ``times`` requests hang until the client disconnects (at most ``seconds``)."""
        with self._lock:
            self._stalls, self._stall_seconds = times, seconds

    @property
    def deliveries(self) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.verified and 200 <= r.status < 300]

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        verified = True
        if self.secret:
            verified = verify_signature(
                self.secret,
                headers.get(TIMESTAMP_HEADER.lower()),
                body,
                headers.get(SIGNATURE_HEADER.lower()),
                now=system_time(),
            )
        with self._lock:
            stall = self._stalls > 0
            self._stalls -= 1 if stall else 0
        if stall:
            deadline = time.monotonic() + self._stall_seconds
            while time.monotonic() < deadline and not await request.is_disconnected():
                await asyncio.sleep(0.02)
        status = self.status if verified else 401
        with self._lock:
            self.received.append(Received(request.url.path, headers, body, verified, status))
        if status == 204:
            return Response(status_code=204)
        return JSONResponse({"verified": verified}, status_code=status)
