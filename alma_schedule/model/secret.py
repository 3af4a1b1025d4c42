"""``Secret``: a string hidden in ``repr``/``str`` and compared in constant time (settings' secret fields)."""

from __future__ import annotations

import hmac

__all__ = ["Secret"]


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
