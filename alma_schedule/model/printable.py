"""The one rule of which characters never reach a terminal (or a log line) raw.

A character is *unprintable* when its Unicode category is a control (Cc: C0, DEL, C1 such as the
8-bit CSI U+009B and OSC U+009D), a format character (Cf: the bidi overrides and isolates such as
U+202E, zero-width joiners, tags, the BOM), a surrogate (Cs) or a line / paragraph separator (Zl,
Zp). Ids refuse them (:func:`alma_schedule.model.ids.check_id`); text that is shown anyway (a row
stored before that check, an error message) shows each as a visible ``\\uXXXX`` escape
(``\\UXXXXXXXX`` beyond the BMP), the way Python writes it.
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
