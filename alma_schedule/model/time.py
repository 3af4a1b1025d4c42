"""Time: the one reading of the system time, the one clamp of a caller's ``now``, and a settable time source.
docs/architecture.md, section "The modules, in detail" (model/time.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from alma_schedule.errors import InvalidInput

__all__ = ["MAX_INSTANT", "MIN_INSTANT", "SettableTime", "aware_utc", "system_time", "trusted_now"]

log = logging.getLogger("alma_schedule.time")

#: The instants a caller's ``now`` may name: the engine adds windows, retention and back-offs to it
#: and builds millisecond run ids from it, so an instant near ``datetime.min`` / ``datetime.max``
#: (year 1, year 9999) would overflow somewhere downstream. Outside this range: :class:`InvalidInput`.
MIN_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
MAX_INSTANT = datetime(9000, 1, 1, tzinfo=UTC)


def system_time() -> datetime:
    """The wall time, aware UTC. The only place the package reads real time for scheduling."""
    return datetime.now(UTC)


def aware_utc(name: str, value: object) -> datetime:
    """``value`` as an aware UTC datetime in [:data:`MIN_INSTANT`, :data:`MAX_INSTANT`);
    :class:`InvalidInput` naming ``name`` when it is not an aware datetime (naive times are never
    read as local) or lies outside that range."""
    if not isinstance(value, datetime):
        raise InvalidInput(f"{name} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(f"{name} must be timezone-aware (naive times are never read as local)")
    try:
        instant = value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+14:00 has no UTC datetime
        instant = None
    if instant is None or not MIN_INSTANT <= instant < MAX_INSTANT:
        raise InvalidInput(
            f"{name} {value.isoformat()} is outside the supported range "
            f"[{MIN_INSTANT.date().isoformat()}, {MAX_INSTANT.date().isoformat()})"
        )
    return instant


def trusted_now(given: datetime | None, time_source: Callable[[], datetime], tolerance: timedelta) -> datetime:
    """The instant a writing call acts at: ``min(given, time_source() + tolerance)``.

    docs/architecture.md, "The modules, in detail" (model/time.py, trusted_now).
    """
    current = aware_utc("the time source's instant", time_source())
    if given is None:
        return current
    instant = aware_utc("now", given)
    ceiling = current + tolerance
    if instant > ceiling:
        log.warning("now %s is ahead of the time source %s; clamped", instant.isoformat(), current.isoformat())
        return ceiling
    return instant


class SettableTime:
    """A settable time source for tests, demos and simulations: ``Settings(time_source=SettableTime(t0))``.

    Returns ``at`` when called; ``set`` and ``advance`` move it (both return the new instant). The
    engine reads time only through ``Settings.time_source``, so every ``now`` default, clamp and expiry
    follows it. Thread-safe (tickers and workers read it concurrently).
    """

    def __init__(self, at: datetime) -> None:
        self._at = at
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._at

    @property
    def at(self) -> datetime:
        return self()

    @at.setter
    def at(self, value: datetime) -> None:
        self.set(value)

    def set(self, at: datetime) -> datetime:
        with self._lock:
            self._at = at
            return at

    def advance(self, delta: timedelta) -> datetime:
        with self._lock:
            self._at += delta
            return self._at


def parse_instant(name: str, value: str) -> datetime:
    """An ISO-8601 instant with an offset (``Z`` accepted); anything else is :class:`InvalidInput`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be an ISO-8601 string, not {type(value).__name__}")
    try:
        given = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name} {value!r} is not an ISO-8601 instant") from None
    if given.tzinfo is None:
        raise InvalidInput(f"{name} {value!r} has no UTC offset")
    return given
