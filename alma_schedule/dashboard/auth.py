"""Who may see the dashboard: the scrypt password hash, HTTP Basic credentials, the CSRF token and
the scopes of ``ALMA_DASHBOARD_SCOPES``.

docs/architecture.md, section "The modules, in detail" (dashboard/auth.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from alma_schedule.dashboard.throttle import Remembered
from alma_schedule.errors import ConfigurationError
from alma_schedule.model import Scope
from alma_schedule.setting_values import ScopeGrant, dashboard_scope_grants
from alma_schedule.settings import Settings

__all__ = ["Access", "Credentials", "hash_password", "verify_password"]

_N, _R, _P = 2**14, 8, 1
#: The least scrypt cost a password hash may have (below it the dashboard refuses to start).
MIN_N, MIN_R = 2**14, 8
_DKLEN = 32
_MAXMEM = 64 * 1024 * 1024


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str, *, n: int = _N, r: int = _R, p: int = _P, salt: bytes | None = None) -> str:
    """The ``scrypt$n$r$p$salt$hash`` text of ``password`` (a fresh 16-byte salt unless given)."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=_DKLEN, maxmem=_MAXMEM)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(digest)}"


@dataclass(frozen=True, slots=True)
class _Parsed:
    n: int
    r: int
    p: int
    salt: bytes
    digest: bytes


def _parse_hash(text: str) -> _Parsed:
    parts = text.split("$")
    bad = ConfigurationError(
        "ALMA_DASHBOARD_PASSWORD_HASH must be scrypt$n$r$p$salt$hash (alma-schedule hash-password)"
    )
    if len(parts) != 6 or parts[0] != "scrypt":
        raise bad
    try:
        n, r, p = (int(v) for v in parts[1:4])
        salt = base64.b64decode(parts[4], validate=True)
        digest = base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error):
        raise bad from None
    if n < 2 or n & (n - 1) or r < 1 or p < 1 or not salt or len(digest) < 16 or n * r * 128 * 2 > _MAXMEM:
        raise bad
    return _Parsed(n, r, p, salt, digest)


def _strong_hash(text: str) -> _Parsed:
    """The parsed hash, refused below n=2^14, r=8 (one line naming the setting)."""
    h = _parse_hash(text)
    if h.n < MIN_N or h.r < MIN_R:
        raise ConfigurationError(
            f"ALMA_DASHBOARD_PASSWORD_HASH is scrypt n={h.n}, r={h.r}: the dashboard needs at least "
            f"n={MIN_N}, r={MIN_R} (`alma-schedule hash-password` prints one)"
        )
    return h


def verify_password(password: str, stored: str) -> bool:
    """Does ``password`` match the stored hash? Constant-time over the digest."""
    h = _parse_hash(stored)
    got = hashlib.scrypt(password.encode(), salt=h.salt, n=h.n, r=h.r, p=h.p, dklen=len(h.digest), maxmem=_MAXMEM)
    return hmac.compare_digest(got, h.digest)


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``(user, password)`` of an ``Authorization: Basic ...`` header, or None."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep else None


class Credentials:
    """The dashboard's one user: checks Basic credentials and issues / checks CSRF tokens."""

    def __init__(self, user: str, password_hash: str) -> None:
        _strong_hash(password_hash)  # a malformed or weak hash refuses the app, naming the setting
        self._user = user
        self._hash = password_hash
        self._csrf_key = secrets.token_bytes(32)
        self._remembered = Remembered()  # headers already verified (scrypt is slow on purpose)

    def remembered(self, header: str | None) -> str | None:
        """The user of a header verified lately (no scrypt), else None."""
        return None if not header else self._remembered.get(header)

    def verify(self, header: str | None) -> str | None:
        """The user name when ``header`` carries valid credentials (scrypt), else None; remembered."""
        creds = basic_credentials(header)
        if creds is None or header is None:
            return None
        user, password = creds
        user_ok = hmac.compare_digest(user.encode(), self._user.encode())
        password_ok = verify_password(password, self._hash)
        if user_ok and password_ok:
            self._remembered.put(header, user)
            return user
        return None

    def check(self, header: str | None) -> str | None:
        """:meth:`remembered`, else :meth:`verify` (in the caller's thread)."""
        return self.remembered(header) or self.verify(header)

    def csrf_token(self, user: str) -> str:
        return hmac.new(self._csrf_key, user.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, user: str, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(self.csrf_token(user).encode(), token.encode())


@dataclass(frozen=True, slots=True)
class Access:
    """What the dashboard may show: every scope (``grants`` None) or the listed ORG/UID and ORG/*."""

    grants: tuple[ScopeGrant, ...] | None
    read_only: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> Access:
        if settings.dashboard_scopes is None:
            raise ConfigurationError("the dashboard is off until ALMA_DASHBOARD_SCOPES is set")
        return cls(dashboard_scope_grants(settings.dashboard_scopes), settings.dashboard_read_only)

    @property
    def fleet(self) -> bool:
        """May system-wide reads be shown (``ALMA_DASHBOARD_SCOPES=*``)?"""
        return self.grants is None

    def allows(self, scope: Scope) -> bool:
        if self.grants is None:
            return True
        return any(org == scope.org and uid in (None, scope.uid) for org, uid in self.grants)

    def listed(self) -> list[Scope]:
        """The concrete scopes of the grant list (ORG/* and ``*`` need the scope typed in)."""
        return [Scope(org, uid) for org, uid in self.grants or () if uid is not None]
