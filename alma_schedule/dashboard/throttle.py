"""What keeps a wrong password cheap: the verified credentials a process remembers, the
failures it counts per client, and who that client is.

docs/architecture.md, section "The modules, in detail" (dashboard/throttle.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "FAILURES_ALLOWED",
    "LOCKOUT_SECONDS",
    "LoginThrottle",
    "Remembered",
    "client_of",
    "trusted_networks",
]

#: The per-process key of :class:`Remembered` (drawn at import: a restart forgets every login).
_PROCESS_KEY = secrets.token_bytes(32)
REMEMBER_SECONDS = 600.0
REMEMBER_MAX = 64

FAILURES_ALLOWED = 10
WINDOW_SECONDS = 60.0
LOCKOUT_SECONDS = 300.0
SLOW_AFTER = 5
SLOW_SECONDS = 1.0
MAX_CLIENTS = 10_000

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Remembered:
    """Verified headers (their HMAC under the process key) and the user each opened, bounded and expiring."""

    def __init__(
        self,
        *,
        seconds: float = REMEMBER_SECONDS,
        size: int = REMEMBER_MAX,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seconds, self._size, self._monotonic = seconds, size, monotonic
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, tuple[str, float]] = OrderedDict()

    @staticmethod
    def _key(header: str) -> bytes:
        return hmac.new(_PROCESS_KEY, header.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()

    def get(self, header: str) -> str | None:
        key, now = self._key(header), self._monotonic()
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if found[1] <= now:
                del self._entries[key]
                return None
            return found[0]

    def put(self, header: str, user: str) -> None:
        key = self._key(header)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (user, self._monotonic() + self._seconds)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class _Client:
    __slots__ = ("failures", "lock", "locked_until", "users")

    def __init__(self) -> None:
        self.failures: deque[float] = deque()
        self.locked_until = 0.0
        self.lock = asyncio.Lock()
        self.users = 0


class LoginThrottle:
    """Failed logins per client: slowed, then refused for a while (see the module's docstring)."""

    def __init__(
        self,
        *,
        allowed: int = FAILURES_ALLOWED,
        window: float = WINDOW_SECONDS,
        lockout: float = LOCKOUT_SECONDS,
        slow_after: int = SLOW_AFTER,
        slow: float = SLOW_SECONDS,
        max_clients: int = MAX_CLIENTS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.allowed, self.window, self.lockout = allowed, window, lockout
        self.slow_after, self.slow, self.max_clients = slow_after, slow, max_clients
        self._monotonic = monotonic
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    def _client(self, client: str) -> _Client:
        found = self._clients.get(client)
        if found is None:
            found = self._clients[client] = _Client()
            self._forget_oldest()
        else:
            self._clients.move_to_end(client)
        return found

    def _forget_oldest(self) -> None:
        for name in list(self._clients):
            if len(self._clients) <= self.max_clients:
                return
            if self._clients[name].users == 0:  # a client taking its turn now is kept
                del self._clients[name]

    def _recent(self, entry: _Client, now: float) -> int:
        while entry.failures and entry.failures[0] <= now - self.window:
            entry.failures.popleft()
        return len(entry.failures)

    def retry_after(self, client: str) -> int | None:
        """Seconds until ``client`` may try again (at least 1), or None when it may now."""
        entry = self._clients.get(client)
        if entry is None:
            return None
        left = entry.locked_until - self._monotonic()
        return max(1, int(left + 0.999)) if left > 0 else None

    def failed(self, client: str) -> tuple[float, bool]:
        """Count a failure of ``client``: ``(seconds to slow its answer, whether it is now refused)``."""
        now = self._monotonic()
        entry = self._client(client)
        self._recent(entry, now)
        entry.failures.append(now)
        count = len(entry.failures)
        if count >= self.allowed:
            entry.locked_until = now + self.lockout
            entry.failures.clear()
            return 0.0, True
        return (self.slow if count >= self.slow_after else 0.0), False

    def succeeded(self, client: str) -> None:
        entry = self._clients.get(client)
        if entry is not None:
            entry.failures.clear()

    def failures(self, client: str) -> int:
        entry = self._clients.get(client)
        return 0 if entry is None else self._recent(entry, self._monotonic())

    @contextlib.asynccontextmanager
    async def turn(self, client: str) -> AsyncIterator[None]:
        """``client``'s attempts one at a time (in this event loop)."""
        entry = self._client(client)
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1


def trusted_networks(proxies: Iterable[str]) -> tuple[Network, ...]:
    """ALMA_TRUSTED_PROXIES as networks (checked by the settings: each one parses)."""
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


def _trusted(text: str, networks: tuple[Network, ...]) -> bool:
    address = _address(text)
    return address is not None and any(address in net for net in networks)


def client_of(scope: Mapping[str, Any], headers: Mapping[str, str], networks: tuple[Network, ...]) -> str:
    """Who a request comes from, for the throttle (at most 64 characters)."""
    peer = scope.get("client")
    address = str(peer[0]) if peer else "unknown"
    if not networks or not _trusted(address, networks):
        return address[:64]
    forwarded = [part.strip() for part in headers.get("x-forwarded-for", "").split(",") if part.strip()]
    for hop in reversed(forwarded):
        if not _trusted(hop, networks):
            return hop[:64]
    return (forwarded[0] if forwarded else address)[:64]
