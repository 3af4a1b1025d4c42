"""The one rule of which characters never reach a terminal (or a log line) raw.

docs/architecture.md, section "The modules, in detail" (model/printable.py).
"""

from __future__ import annotations

import unicodedata

__all__ = ["REFUSED_IN_IDS", "UNPRINTABLE", "escape_unprintable", "unprintable"]

#: The categories escaped on display.
UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: The categories an id refuses (every Unicode control and format character).
REFUSED_IN_IDS = frozenset({"Cc", "Cf", "Cs"})


def unprintable(char: str) -> bool:
    """True when ``char`` (one character) is never shown raw."""
    return unicodedata.category(char) in UNPRINTABLE


def escape_code(char: str) -> str:
    """``\\u202e`` for U+202E, ``\\U000e0041`` beyond the BMP."""
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_unprintable(text: str) -> str:
    """``text`` with every unprintable character replaced by its visible escape."""
    if text.isprintable():  # the common case: nothing to do (isprintable refuses a superset)
        return text
    return "".join(escape_code(c) if unprintable(c) else c for c in text)
