"""The three schedule kinds as frozen values, plus the instant rules every function shares.

* :class:`Cron` ``(expr, tz=None)``: a 5-field cron read on the wall clock of ``tz`` (None = UTC).
* :class:`Every` ``(interval)``: fires at ``registered_at + k * interval``, k >= 1.
* :class:`At` ``(when)``: fires once at ``when`` (normalised to UTC).

Constructing one validates it (:class:`~alma_schedule.errors.InvalidSchedule` otherwise), so a value
of these types is always usable. ``to_json()`` returns the JSON object
:func:`~alma_schedule.core.parse.parse_schedule` reads back to an equal value.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from alma_schedule.core.cron import CronSpec, compile_expr
from alma_schedule.core.interval import check_interval, format_interval
from alma_schedule.core.zones import check_zone
from alma_schedule.errors import InvalidSchedule

UTC = UTC
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def to_epoch(value: object, name: str) -> int:
    """Whole epoch seconds (floor) of an aware datetime; a naive one is refused, never read as local."""
    if type(value) is datetime and value.tzinfo is UTC:  # the usual case: a plain UTC datetime
        return _utc_epoch(value)
    if not isinstance(value, datetime):
        raise InvalidSchedule(f"{name!r} must be a timezone-aware datetime, got {type(value).__name__}")
    if value.tzinfo is not UTC and value.utcoffset() is None:
        raise InvalidSchedule(
            f"{name!r} must be timezone-aware, got the naive datetime {value.isoformat()} "
            "(naive times are never read as local time)"
        )
    try:
        return (value - EPOCH) // SECOND
    except OverflowError as exc:  # pragma: no cover - only at datetime.min/max with an offset
        raise InvalidSchedule(f"{name!r} {value.isoformat()} is out of range") from exc


@lru_cache(maxsize=8192)
def _utc_epoch(value: datetime) -> int:
    """:func:`to_epoch` of a plain UTC datetime (equal ones are the same instant), cached: a tick
    converts the same few instants (its ``now``, shared cursors and anchors) once per routine."""
    return (value - EPOCH) // SECOND


@lru_cache(maxsize=8192)
def from_epoch(u: int) -> datetime:
    """Aware UTC datetime of epoch second ``u`` (OverflowError beyond year 9999); cached (immutable)."""
    try:
        return datetime.fromtimestamp(u, UTC)
    except (ValueError, OSError) as exc:  # platform range errors: report as out of range
        raise OverflowError(str(exc)) from exc


@lru_cache(maxsize=4096)
def compile_cron(expr: str, tz: str | None) -> tuple[CronSpec, str]:
    """(parsed spec, zone key) for a cron in a zone; cached by (expr, tz)."""
    if tz is not None:
        check_zone(tz)
    return compile_expr(expr), tz or "UTC"


@dataclass(frozen=True, slots=True)
class Cron:
    """A 5-field cron expression read on the wall clock of IANA zone ``tz`` (None means UTC)."""

    expr: str
    tz: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.expr, str):
            raise InvalidSchedule(f"'cron' must be a string, got {type(self.expr).__name__}")
        if self.tz is not None and not isinstance(self.tz, str):
            raise InvalidSchedule(f"'tz' must be a string or null, got {type(self.tz).__name__}")
        compile_cron(self.expr, self.tz)

    @property
    def zone(self) -> str:
        """The zone key the wall clock is read in (``UTC`` when ``tz`` is None)."""
        return self.tz or "UTC"

    @property
    def wildcard(self) -> bool:
        """True for a wildcard job (minute or hour field starts with ``*``), see docs/dst-policy.md."""
        return compile_cron(self.expr, self.tz)[0].wildcard

    def to_json(self) -> dict[str, Any]:
        return {"cron": self.expr} if self.tz is None else {"cron": self.expr, "tz": self.tz}


@dataclass(frozen=True, slots=True)
class Every:
    """Fires every ``interval`` after registration: ``registered_at + k * interval``, k >= 1."""

    interval: timedelta

    def __post_init__(self) -> None:
        check_interval(self.interval)

    def to_json(self) -> dict[str, Any]:
        return {"every": format_interval(self.interval)}


@dataclass(frozen=True, slots=True)
class At:
    """Fires once, at ``when`` (aware, whole seconds; stored in UTC)."""

    when: datetime

    def __post_init__(self) -> None:
        u = to_epoch(self.when, "at")
        if self.when.microsecond:
            raise InvalidSchedule(f"'at' {self.when.isoformat()} is not a whole second")
        try:
            object.__setattr__(self, "when", from_epoch(u))
        except OverflowError as exc:
            raise InvalidSchedule(f"'at' {self.when.isoformat()} is out of range") from exc

    def to_json(self) -> dict[str, Any]:
        return {"at": self.when.isoformat()}


ScheduleValue = Cron | Every | At
