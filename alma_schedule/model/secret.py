"""``Secret``: a string hidden in ``repr``/``str`` and compared in constant time (settings' secret fields);
:func:`mask_url`: a URL with its password (and any credential in its query) shown as ``***``."""

from __future__ import annotations

import hmac
import re

__all__ = ["MASK", "Secret", "mask_url"]

#: What a masked password reads as.
MASK = "***"
_USER = re.compile(r"[^:/@]*:")
_QUERY_CREDENTIAL = re.compile(
    r"([?&;](?:password|passwd|pass|pwd|secret|token|api_key|apikey|key|access_token|auth)=)[^&#;]*", re.IGNORECASE
)


def mask_url(url: str) -> str:
    """``url`` as it may be shown: ``scheme://user:***@host/...``, each credential in its query
    (``?password=``, ``token=``, ...) as ``***``; every URL of a ``;``-separated failover list (kombu)
    masked. The value the code uses is never this: it is only for ``repr``, ``describe()`` and logs.
    A password holding an unencoded ``@`` or ``/`` is masked up to the last ``@`` (never partly shown)."""
    return ";".join(_mask_one(part) for part in url.split(";"))


def _mask_one(url: str) -> str:
    head, sep, tail = url.partition("://")
    if sep:
        user = _USER.match(tail)
        at = tail.rfind("@")
        if user is not None and at >= user.end():  # everything from the colon to the last @: never less
            tail = f"{user.group(0)}{MASK}{tail[at:]}"
        url = f"{head}{sep}{tail}"
    return _QUERY_CREDENTIAL.sub(lambda m: m.group(1) + MASK, url)


class Secret:
    """A secret string: hidden in ``repr``/``str``, compared in constant time."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def matches(self, candidate: str | bytes) -> bool:
        if isinstance(candidate, str):
            candidate = candidate.encode()
        return hmac.compare_digest(self._value.encode(), candidate)

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(("Secret", len(self._value)))

    def __bool__(self) -> bool:
        return bool(self._value)
