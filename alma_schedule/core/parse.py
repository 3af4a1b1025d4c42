"""Reading schedules from their JSON shapes.

docs/architecture.md, section "The modules, in detail" (core/parse.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

from alma_schedule.core.interval import parse_interval
from alma_schedule.core.policy import POLICY_KEYS, policy_of
from alma_schedule.core.solar import SEARCH_DAYS, solar_next
from alma_schedule.core.types import After, At, Cron, Every, ScheduleValue, Solar, to_epoch
from alma_schedule.errors import InvalidSchedule

_KINDS = ("cron", "every", "at", "solar", "after")
_ALLOWED = {
    "cron": ("cron", "tz", "calendar", "roll"),
    "every": ("every",),
    "at": ("at",),
    "solar": ("solar", "lat", "lon", "tz"),
    "after": ("after",),
}
_EXPECTED = "'cron', 'every', 'at', 'solar' or 'after'"
#: The policies a fixed delay refuses: there are no nominal past instants to catch up, and a next
#: fire is due only after the previous run ended (no overlap).
_NOT_AFTER_KEYS = ("catch_up", "overlap")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


def _parse_at(value: object) -> At:
    if isinstance(value, datetime):
        return At(value)
    if not isinstance(value, str):
        raise InvalidSchedule(f"'at' must be an ISO 8601 string with an offset, got {type(value).__name__}")
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise InvalidSchedule(f"'at' {_show(value)} is not an ISO 8601 date-time") from exc
    if when.utcoffset() is None:
        raise InvalidSchedule(f"'at' needs a time zone offset (got {_show(value)}; e.g. append +00:00)")
    return At(when)


def _parse_solar(obj: Mapping[object, object]) -> Solar:
    for key in ("lat", "lon"):
        if key not in obj:
            raise InvalidSchedule(f"'solar' schedule needs {key!r} (degrees, north and east positive)")
    event, lat, lon, tz = obj["solar"], obj["lat"], obj["lon"], obj.get("tz")
    if tz is not None and not isinstance(tz, str):
        raise InvalidSchedule(f"'tz' must be a string or null, got {type(tz).__name__}")
    return Solar(event, lat, lon, tz)  # type: ignore[arg-type]  # Solar checks each field's type


def _parse_after(obj: Mapping[object, object]) -> After:
    for key in _NOT_AFTER_KEYS:
        if key in obj:
            raise InvalidSchedule(
                f"{key!r} does not apply to an 'after' schedule (a fixed delay has no past instants to "
                "catch up, and its next fire is due only after the previous run ended)"
            )
    try:
        return After(parse_interval(obj["after"], name="after"))
    except InvalidSchedule as exc:  # every refusal names the field
        raise exc if "'after'" in str(exc) else InvalidSchedule(f"'after': {exc}") from exc


def _from_mapping(obj: Mapping[object, object]) -> ScheduleValue:
    kinds = [k for k in _KINDS if k in obj]
    if not kinds:
        unknown = [k for k in obj if k not in ("tz", "lat", "lon") and k not in POLICY_KEYS]
        if unknown:
            raise InvalidSchedule(f"unknown key {_show(unknown[0])} in schedule (expected {_EXPECTED})")
        raise InvalidSchedule(f"schedule needs one of {_EXPECTED}")
    if len(kinds) > 1:
        raise InvalidSchedule(f"schedule has more than one of {', '.join(repr(k) for k in kinds)}")
    kind = kinds[0]
    for key in obj:
        if key not in _ALLOWED[kind] and key not in POLICY_KEYS:
            raise InvalidSchedule(f"unknown key {_show(key)} in {kind!r} schedule")
    policy_of(obj)  # the policies beside the timing are refused here too (core.policy reads them)
    if kind == "cron":
        expr, tz = obj["cron"], obj.get("tz")
        if not isinstance(expr, str):
            raise InvalidSchedule(f"'cron' must be a string, got {type(expr).__name__}")
        if tz is not None and not isinstance(tz, str):
            raise InvalidSchedule(f"'tz' must be a string or null, got {type(tz).__name__}")
        return Cron(expr, tz, obj.get("calendar"), obj.get("roll"))  # type: ignore[arg-type]  # Cron checks them
    if kind == "every":
        return Every(parse_interval(obj["every"]))
    if kind == "solar":
        return _parse_solar(obj)
    if kind == "after":
        return _parse_after(obj)
    return _parse_at(obj["at"])


def parse_schedule(value: object) -> ScheduleValue:
    """A :class:`Cron`, :class:`Every`, :class:`At`, :class:`Solar` or :class:`After` from a JSON
    object, JSON text or a schedule."""
    if isinstance(value, Cron | Every | At | Solar | After):
        return value
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidSchedule("schedule JSON is not valid UTF-8") from exc
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise InvalidSchedule(f"schedule is not valid JSON: {_show(str(exc))}") from exc
    if not isinstance(value, Mapping):
        raise InvalidSchedule(f"schedule must be a JSON object with {_EXPECTED}, got {type(value).__name__}")
    return _from_mapping(value)


def validate_schedule(value: object, *, now: datetime | None = None) -> ScheduleValue:
    """:func:`parse_schedule`, and with ``now`` also refuse an ``at`` earlier than ``now`` and a
    ``solar`` event that does not occur within 366 days of ``now``."""
    schedule = parse_schedule(value)
    if now is not None:
        n = to_epoch(now, "now")
        if isinstance(schedule, At) and to_epoch(schedule.when, "at") < n:
            raise InvalidSchedule(
                f"'at' {schedule.when.isoformat()} is earlier than now ({now.isoformat()}); it would never fire"
            )
        if isinstance(schedule, Solar):
            _check_occurs(schedule, n)
    return schedule


def _check_occurs(schedule: Solar, n: int) -> None:
    if solar_next(schedule.event, schedule.lat, schedule.lon, n, days=min(SEARCH_DAYS, 366)) is None:
        raise InvalidSchedule(
            f"'solar' {schedule.event!r} does not occur at lat {schedule.lat!r}, lon {schedule.lon!r} within "
            "366 days (the sun never crosses that altitude there in a daily cycle); it would never fire"
        )
