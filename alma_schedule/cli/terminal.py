"""The terminal medium's one escape: every text the CLI prints from the store goes through here.

docs/architecture.md, section "The modules, in detail" (cli/terminal.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alma_schedule.model.printable import escape_unprintable

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["terminal_cell", "terminal_text"]


def terminal_text(value: object) -> str:
    """``value`` as text safe for a terminal: ``""`` for None, ``str(value)`` with every
    unprintable character shown as its ``\\uXXXX`` escape."""
    return "" if value is None else escape_unprintable(str(value))


def terminal_cell(value: object) -> Text:
    """``value`` as a rich :class:`~rich.text.Text` (never markup) of :func:`terminal_text`."""
    from rich.text import Text

    return Text(terminal_text(value))
