"""The five schedule kinds as frozen values, plus the instant rules every function shares.

docs/architecture.md, section "The modules, in detail" (core/types.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from alma_schedule.core.cron import CronSpec, compile_expr
from alma_schedule.core.interval import check_interval, format_interval
from alma_schedule.core.solar import check_solar
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
    """A 5-field cron expression read on the wall clock of IANA zone ``tz`` (None means UTC); with a
    business ``calendar`` (a name, :mod:`.calendar`), its fires on closed days are rolled by ``roll``."""

    expr: str
    tz: str | None = None
    calendar: str | None = None
    roll: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.expr, str):
            raise InvalidSchedule(f"'cron' must be a string, got {type(self.expr).__name__}")
        if self.tz is not None and not isinstance(self.tz, str):
            raise InvalidSchedule(f"'tz' must be a string or null, got {type(self.tz).__name__}")
        compile_cron(self.expr, self.tz)
        if self.calendar is not None or self.roll is not None:
            _check_calendar(self)

    @property
    def zone(self) -> str:
        """The zone key the wall clock is read in (``UTC`` when ``tz`` is None)."""
        return self.tz or "UTC"

    @property
    def wildcard(self) -> bool:
        """True for a wildcard job (minute or hour field starts with ``*``), see docs/dst-policy.md."""
        return compile_cron(self.expr, self.tz)[0].wildcard

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cron": self.expr} if self.tz is None else {"cron": self.expr, "tz": self.tz}
        if self.calendar is not None:
            out.update(calendar=self.calendar, roll=self.roll)
        return out


def _check_calendar(cron: Cron) -> None:
    """``calendar`` is a calendar name (:func:`check_calendar_name`); ``roll`` one of the three, only
    with a calendar, ``skip`` when not given."""
    from alma_schedule.core.calendar import check_roll

    if cron.calendar is None:
        raise InvalidSchedule("'roll' needs a 'calendar' (the business calendar whose closed days it rolls off)")
    check_calendar_name(cron.calendar, "calendar")
    object.__setattr__(cron, "roll", "skip" if cron.roll is None else check_roll(cron.roll))


CALENDAR_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")


def check_calendar_name(value: object, field_name: str = "name") -> str:
    """A calendar name: lower-case letters, digits, ``_ . -``, up to 63 characters."""
    if not isinstance(value, str) or not CALENDAR_NAME.fullmatch(value):
        shown = repr(value[:60]) if isinstance(value, str) else f"a {type(value).__name__}"
        raise InvalidSchedule(
            f"{field_name!r} must be a calendar name (lower-case letters, digits, '_', '.', '-'; up to 63), got {shown}"
        )
    return value


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


@dataclass(frozen=True, slots=True)
class Solar:
    """Fires at solar ``event`` seen from (``lat``, ``lon``) on each day it occurs, at its UTC instant;
    ``tz`` (None: UTC) only changes how the fires are shown."""

    event: str
    lat: float
    lon: float
    tz: str | None = None

    def __post_init__(self) -> None:
        check_solar(self.event, self.lat, self.lon)
        if self.tz is not None:
            check_zone(self.tz)

    @property
    def zone(self) -> str:
        """The zone the fires are shown in (``UTC`` when ``tz`` is None)."""
        return self.tz or "UTC"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"solar": self.event, "lat": self.lat, "lon": self.lon}
        return out if self.tz is None else {**out, "tz": self.tz}


#: The longest ``after`` (fixed delay): a year.
MAX_AFTER = timedelta(days=365)


@dataclass(frozen=True, slots=True)
class After:
    """A fixed delay: the first fire at registration (or ``not_before``), each later one ``delay``
    past the END of the previous run (docs/architecture.md, "Fixed-delay routines"). The core reads
    it as one fire at the routine's anchor; the store sets the next one when a run ends."""

    delay: timedelta

    def __post_init__(self) -> None:
        try:
            check_interval(self.delay)
        except InvalidSchedule as exc:
            raise InvalidSchedule(f"'after': {exc}") from exc
        if self.delay > MAX_AFTER:
            raise InvalidSchedule(f"'after' must be at most a year (365d), got {format_interval(self.delay)}")

    def to_json(self) -> dict[str, Any]:
        return {"after": format_interval(self.delay)}


ScheduleValue = Cron | Every | At | Solar | After
