"""Interval text for ``every``: parse ``15m``, ``1h30m``, ``2s``, ``1d``, ``PT15M`` or whole seconds.

The canonical form (what ``Every.to_json`` writes) is the unit string with the largest units
first and zero units left out: 900 s -> ``15m``, 5400 s -> ``1h30m``, 86400 s -> ``1d``.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from alma_schedule.errors import InvalidSchedule

MIN_INTERVAL = timedelta(seconds=1)
MAX_INTERVAL = timedelta(days=36525)  # 100 years
_UNITS = re.compile(r"(?:([0-9]{1,9})d)?(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,12})s)?")
_ISO = re.compile(
    r"P(?:([0-9]{1,9})W)?(?:([0-9]{1,9})D)?"
    r"(?:T(?:([0-9]{1,9})H)?(?:([0-9]{1,9})M)?(?:([0-9]{1,12})(?:[.,]([0-9]{1,9}))?S)?)?",
    re.IGNORECASE,
)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def check_interval(interval: object) -> timedelta:
    """Refuse anything but a whole number of seconds between 1 second and 100 years."""
    if not isinstance(interval, timedelta):
        raise InvalidSchedule(f"interval must be a timedelta, got {type(interval).__name__}")
    if interval < MIN_INTERVAL:
        raise InvalidSchedule("interval must be at least 1 second")
    if interval.microseconds:
        raise InvalidSchedule(f"interval {interval} is not a whole number of seconds")
    if interval > MAX_INTERVAL:
        raise InvalidSchedule("interval must be at most 100 years")
    return interval


def _from_seconds(seconds: int) -> timedelta:
    if seconds < 1:
        raise InvalidSchedule("interval must be at least 1 second")
    if seconds > MAX_INTERVAL // MIN_INTERVAL:
        raise InvalidSchedule("interval must be at most 100 years")
    return timedelta(seconds=seconds)


def parse_interval(value: object, *, name: str = "every") -> timedelta:
    """``every`` value (or the interval of the field ``name``: a refusal names the field the user
    wrote) -> timedelta; raises :class:`InvalidSchedule` naming the reason."""
    field = repr(name)
    if isinstance(value, bool):
        raise InvalidSchedule(f"{field} must be an interval like '15m' or a number of seconds, got a boolean")
    if isinstance(value, timedelta):
        return check_interval(value)
    if isinstance(value, int):
        return _from_seconds(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidSchedule(f"{field} {_show(value)} is not a finite number of seconds")
        if value < 1:
            raise InvalidSchedule("interval must be at least 1 second")
        if not value.is_integer():
            raise InvalidSchedule(f"{field} {_show(value)} is not a whole number of seconds")
        if value > MAX_INTERVAL.total_seconds():
            raise InvalidSchedule("interval must be at most 100 years")
        return _from_seconds(int(value))
    if not isinstance(value, str):
        raise InvalidSchedule(f"{field} must be a string or a number of seconds, got {type(value).__name__}")
    text = value.strip()
    if text.upper().startswith("P"):
        m = _ISO.fullmatch(text)
        if m is None or text.upper() in ("P", "PT") or text.upper().endswith("T"):
            raise InvalidSchedule(
                f"{field} {_show(value)} is not a supported ISO 8601 duration (use weeks, days, "
                "hours, minutes and seconds, e.g. 'PT15M')"
            )
        weeks, days, hours, minutes, seconds, frac = m.groups()
        total = (
            int(weeks or 0) * 604800
            + int(days or 0) * 86400
            + int(hours or 0) * 3600
            + int(minutes or 0) * 60
            + int(seconds or 0)
        )
        if total >= 1 and frac is not None and frac.strip("0"):
            raise InvalidSchedule(f"{field} {_show(value)} is not a whole number of seconds")
        return _from_seconds(total)
    m = _UNITS.fullmatch(text.lower())
    if m is None or not text or not any(m.groups()):
        raise InvalidSchedule(
            f"{field} {_show(value)} is not an interval (use e.g. '15m', '1h30m', '2s', '1d', 'PT15M' "
            "or a number of seconds)"
        )
    days, hours, minutes, seconds = (int(g or 0) for g in m.groups())
    return _from_seconds(days * 86400 + hours * 3600 + minutes * 60 + seconds)


def format_interval(interval: timedelta) -> str:
    """Canonical unit string, largest units first, zero units dropped: ``15m``, ``1h30m``, ``1d``."""
    total = interval // MIN_INTERVAL
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")]
    return "".join(f"{n}{u}" for n, u in parts if n) or "0s"
