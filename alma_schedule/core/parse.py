"""Reading schedules from their JSON shapes.

Shapes: ``{"cron": "0 8 * * 1-5", "tz": "Europe/Lisbon"}`` (``tz`` optional, null = UTC),
``{"every": "15m"}`` (also ``"PT15M"``, ``"1h30m"``, ``"2s"``, ``"1d"`` or whole seconds as a
number) and ``{"at": "2026-12-24T18:00:00+00:00"}``; or a JSON string holding one of those. The
same object may carry the routine's policies (:mod:`.policy`); they are validated here and are not
part of the timing value.
Every refusal is an :class:`~alma_schedule.errors.InvalidSchedule` whose message names the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

from alma_schedule.core.interval import parse_interval
from alma_schedule.core.policy import POLICY_KEYS, policy_of
from alma_schedule.core.types import At, Cron, Every, ScheduleValue, to_epoch
from alma_schedule.errors import InvalidSchedule

_KINDS = ("cron", "every", "at")
_ALLOWED = {"cron": ("cron", "tz"), "every": ("every",), "at": ("at",)}


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


def _from_mapping(obj: Mapping[object, object]) -> ScheduleValue:
    kinds = [k for k in _KINDS if k in obj]
    if not kinds:
        unknown = [k for k in obj if k != "tz" and k not in POLICY_KEYS]
        if unknown:
            raise InvalidSchedule(f"unknown key {_show(unknown[0])} in schedule (expected 'cron', 'every' or 'at')")
        raise InvalidSchedule("schedule needs one of 'cron', 'every' or 'at'")
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
        return Cron(expr, tz)
    if kind == "every":
        return Every(parse_interval(obj["every"]))
    return _parse_at(obj["at"])


def parse_schedule(value: object) -> ScheduleValue:
    """A :class:`Cron`, :class:`Every` or :class:`At` from a JSON object, JSON text or a schedule."""
    if isinstance(value, Cron | Every | At):
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
        raise InvalidSchedule(
            f"schedule must be a JSON object with 'cron', 'every' or 'at', got {type(value).__name__}"
        )
    return _from_mapping(value)


def validate_schedule(value: object, *, now: datetime | None = None) -> ScheduleValue:
    """:func:`parse_schedule`, and with ``now`` also refuse an ``at`` earlier than ``now``."""
    schedule = parse_schedule(value)
    if now is not None:
        n = to_epoch(now, "now")
        if isinstance(schedule, At) and to_epoch(schedule.when, "at") < n:
            raise InvalidSchedule(
                f"'at' {schedule.when.isoformat()} is earlier than now ({now.isoformat()}); it would never fire"
            )
    return schedule
