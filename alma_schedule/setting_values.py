"""Values of settings: durations as settings write them (``90``, ``90s``, ``15m``, ``2h``, ``1d``,
``1h30m``), the derived tick expiry, and the store's schema name. Re-exported by
:mod:`alma_schedule.settings`, which reads every setting."""

from __future__ import annotations

import re
from datetime import timedelta

from alma_schedule.errors import ConfigurationError

__all__ = ["DEFAULT_DATABASE_SCHEMA", "check_database_schema", "derived_tick_expires", "parse_duration", "seconds_text"]

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(name: str, text: str | float | int | timedelta) -> timedelta:
    """Parse ``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` into a timedelta (> 0 not required)."""
    if isinstance(text, timedelta):
        return text
    if isinstance(text, bool):
        raise ConfigurationError(f"{name}: expected a duration, got {text!r}")
    if isinstance(text, (int, float)):
        return timedelta(seconds=text)
    raw = text.strip().lower()
    try:
        return timedelta(seconds=float(raw))
    except ValueError:
        pass
    m = _DURATION.match(raw)
    if not raw or not m or not any(m.groups()):
        raise ConfigurationError(f"{name}: {text!r} is not a duration (use e.g. 90s, 15m, 2h, 1d)")
    d, h, mi, s = m.groups()
    return timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))


def derived_tick_expires(period: timedelta) -> timedelta:
    """The default ``tick_expires``: ``period - max(1 s, period / 12)`` (55 s at 60 s, 9 s at 10 s):
    a tick expires before the next one is sent, so ticks piled up in an outage never fire late."""
    return period - max(timedelta(seconds=1), period / 12)


def seconds_text(value: timedelta) -> str:
    """``90s``: a duration as a setting's message shows it."""
    return f"{value.total_seconds():g}s"


#: The store's own namespace in a shared database: a PostgreSQL schema, or a table prefix on SQLite.
DEFAULT_DATABASE_SCHEMA = "alma"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_database_schema(value: str, label: str = "ALMA_DATABASE_SCHEMA") -> str:
    """``value`` if it is a plain lower-case identifier (``^[a-z_][a-z0-9_]{0,62}$``, not ``pg_*``,
    which PostgreSQL reserves), else a one-line :class:`ConfigurationError` naming ``label``."""
    if not isinstance(value, str) or not _SCHEMA_NAME.match(value) or value.startswith("pg_"):
        raise ConfigurationError(
            f"{label}: {value!r} is not a schema name (lower-case letters, digits and _, "
            "at most 63, not starting with a digit or pg_)"
        )
    return value
