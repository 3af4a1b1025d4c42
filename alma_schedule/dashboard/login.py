"""Who a request of the dashboard or ``/metrics`` is, at the least cost.

docs/architecture.md, section "The modules, in detail" (dashboard/login.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from alma_schedule.dashboard.auth import Credentials
from alma_schedule.dashboard.scrypt_gate import GATE, GateFull, ScryptGate
from alma_schedule.dashboard.throttle import LoginThrottle, client_of, trusted_networks

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from alma_schedule.settings import Settings

__all__ = ["REALM", "Login", "Verdict"]

log = logging.getLogger(__name__)

REALM = 'Basic realm="alma-schedule dashboard", charset="UTF-8"'


@dataclass(frozen=True, slots=True)
class Verdict:
    """``user``: who opened (the metrics token: ``bearer``, no user); else refused, ``retry_after`` set for 429."""

    user: str | None
    retry_after: int | None = None
    bearer: bool = False

    @property
    def ok(self) -> bool:
        return self.user is not None or self.bearer


class Login:
    """The dashboard's (and ``/metrics``') authentication, one per app."""

    def __init__(
        self,
        settings: Settings,
        credentials: Credentials | None,
        *,
        throttle: LoginThrottle | None = None,
        gate: ScryptGate = GATE,
    ) -> None:
        self.credentials = credentials
        self.throttle = throttle or LoginThrottle()
        self.gate = gate
        self._networks = trusted_networks(settings.trusted_proxies)

    def _cheap(self, header: str, bearer: Callable[[str | None], bool] | None) -> Verdict | None:
        if self.credentials is not None:
            user = self.credentials.remembered(header)
            if user is not None:
                return Verdict(user)
        if bearer is not None and bearer(header):
            return Verdict(None, bearer=True)
        return None

    async def check(self, request: Request, bearer: Callable[[str | None], bool] | None = None) -> Verdict:
        """Who ``request`` is (``bearer``: a check of a token that also opens, for ``/metrics``)."""
        header = request.headers.get("authorization")
        if not header:
            return Verdict(None)
        cheap = self._cheap(header, bearer)
        if cheap is not None:
            return cheap
        client = client_of(request.scope, request.headers, self._networks)
        wait = self.throttle.retry_after(client)
        if wait is not None:
            return Verdict(None, wait)
        async with self.throttle.turn(client):
            wait = self.throttle.retry_after(client)
            if wait is not None:
                return Verdict(None, wait)
            cheap = self._cheap(header, bearer)  # an attempt of this client before ours may have verified it
            if cheap is not None:
                return cheap
            user = None
            if self.credentials is not None:
                credentials = self.credentials
                try:
                    user = await self.gate.run(lambda: credentials.verify(header))
                except GateFull:
                    return Verdict(None, 1)
            if user is not None:
                self.throttle.succeeded(client)
                return Verdict(user)
            slow, refused = self.throttle.failed(client)
            if refused:
                log.warning(
                    "dashboard: %d failed logins from %r within %.0f s: refused for %.0f s",
                    self.throttle.allowed,
                    client,
                    self.throttle.window,
                    self.throttle.lockout,
                )
            if slow:
                await asyncio.sleep(slow)
        return Verdict(None)

    @staticmethod
    def refusal(verdict: Verdict) -> Response:
        """401 asking for credentials, or 429 with ``Retry-After``."""
        from starlette.responses import PlainTextResponse

        if verdict.retry_after is not None:
            return PlainTextResponse(
                f"too many failed logins from this address: try again in {verdict.retry_after} s",
                status_code=429,
                headers={"Retry-After": str(verdict.retry_after)},
            )
        return PlainTextResponse("authentication required", status_code=401, headers={"WWW-Authenticate": REALM})
