"""Identifiers: the one validation of an id, and ULIDs for manual runs.

docs/architecture.md, section "The modules, in detail" (model/ids.py).
"""

from __future__ import annotations

import os
import re
import time
import unicodedata

from alma_schedule.errors import InvalidInput
from alma_schedule.model.printable import REFUSED_IN_IDS, escape_code, escape_unprintable

__all__ = ["MANUAL_PREFIX", "MAX_ID_LENGTH", "check_id", "check_new_id", "manual_run_id", "new_ulid"]

MAX_ID_LENGTH = 200
#: The run id of a manual run (``trigger``) starts with this; a scheduled fire's is ``fire_id(instant)``.
MANUAL_PREFIX = "manual:"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def check_id(name: str, value: object, *, allow_slash: bool = True) -> str:
    """Return ``value`` if it is a usable id, else raise :class:`InvalidInput` naming ``name``."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, not {type(value).__name__}")
    if not value:
        raise InvalidInput(f"{name} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(f"{name} is {len(value)} characters long (at most {MAX_ID_LENGTH})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name} is not valid UTF-8 text") from None
    if _CONTROL.search(value):
        raise InvalidInput(f"{name} contains a control character (NUL included): '{escape_unprintable(value)}'")
    if not allow_slash and "/" in value:
        raise InvalidInput(f"{name} must not contain '/'")
    if value != value.strip():
        raise InvalidInput(f"{name} must not start or end with whitespace")
    return value


def check_new_id(name: str, value: object, *, allow_slash: bool = True) -> str:
    """:func:`check_id`, and no Unicode control or format character (categories Cc, Cf): the rule
    of an id being created. The refusal names the id and the character, both as ``\\uXXXX``
    escapes (the message never carries the character itself to a terminal or a log)."""
    text = check_id(name, value, allow_slash=allow_slash)
    if text.isprintable():  # isprintable refuses a superset of Cc and Cf: the common case ends here
        return text
    for char in text:
        category = unicodedata.category(char)
        if category in REFUSED_IN_IDS:
            kind = "format" if category == "Cf" else "control"
            label = unicodedata.name(char, "")
            named = f"{escape_code(char)} ({label})" if label else escape_code(char)
            raise InvalidInput(
                f"{name} '{escape_unprintable(text)}' contains the {kind} character {named}: "
                "ids refuse Unicode control and format characters"
            )
    return text


def new_ulid(now_ms: int | None = None) -> str:
    """A 26-character Crockford base32 ULID: 48 bits of milliseconds, 80 random bits.

    Sorts by time; ``now_ms`` is for tests (the clock is read here only for uniqueness, never for
    scheduling decisions).
    """
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    if not 0 <= ms < 2**48:
        raise InvalidInput("ULID time out of range")
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    out = []
    for _ in range(26):
        out.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(out))


def manual_run_id(now_ms: int | None = None) -> str:
    """The run id of a manual run: ``manual:<ULID>``."""
    return MANUAL_PREFIX + new_ulid(now_ms)
