"""A routine's schedule policies, written in the same JSON object as its schedule.

docs/architecture.md, section "The modules, in detail" (core/policy.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from alma_schedule.core.interval import format_interval, parse_interval
from alma_schedule.errors import InvalidSchedule

__all__ = ["OVERLAP_MODES", "POLICY_KEYS", "MAX_RUNS_LIMIT", "SchedulePolicy", "parse_policy", "policy_of"]

#: The keys of a schedule object that are policies, not timing.
POLICY_KEYS = ("overlap", "catch_up", "not_before", "not_after", "max_runs", "jitter", "expect")
OVERLAP_MODES = ("skip", "latest")
#: The largest ``max_runs`` (a 32-bit column counts the claims).
MAX_RUNS_LIMIT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SchedulePolicy:
    """The policies of one routine's schedule; the defaults are 0.1.0's behaviour."""

    overlap: str = "skip"
    catch_up: timedelta | None = None
    not_before: datetime | None = None
    not_after: datetime | None = None
    max_runs: int | None = None
    jitter: timedelta | None = None
    #: The "did not run" alarm window: a fire not ended successfully this long after its instant is
    #: overdue (policies.overdue).
    expect: timedelta | None = None

    @property
    def is_default(self) -> bool:
        return self == DEFAULT_POLICY

    def to_json(self) -> dict[str, Any]:
        """The keys that differ from the defaults, in their canonical text."""
        out: dict[str, Any] = {}
        if self.overlap != "skip":
            out["overlap"] = self.overlap
        if self.catch_up is not None:
            out["catch_up"] = format_interval(self.catch_up)
        if self.not_before is not None:
            out["not_before"] = self.not_before.isoformat()
        if self.not_after is not None:
            out["not_after"] = self.not_after.isoformat()
        if self.max_runs is not None:
            out["max_runs"] = self.max_runs
        if self.jitter is not None:
            out["jitter"] = format_interval(self.jitter)
        if self.expect is not None:
            out["expect"] = format_interval(self.expect)
        return out


DEFAULT_POLICY = SchedulePolicy()


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


def _duration(key: str, value: object) -> timedelta:
    try:
        return parse_interval(value)
    except InvalidSchedule as exc:
        raise InvalidSchedule(f"{key!r}: " + str(exc).replace("'every' ", "", 1)) from None


def _instant(key: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise InvalidSchedule(f"{key!r} must be an ISO 8601 string with an offset, got {type(value).__name__}")
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidSchedule(f"{key!r} {_show(value)} is not an ISO 8601 date-time") from None
    if when.utcoffset() is None:
        raise InvalidSchedule(f"{key!r} needs a time zone offset (got {_show(value)}; e.g. append +00:00)")
    try:
        return when.astimezone(UTC)
    except OverflowError:
        raise InvalidSchedule(f"{key!r} {_show(value)} is out of range") from None


def _max_runs(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSchedule(f"'max_runs' must be a whole number, got {type(value).__name__}")
    if not 1 <= value <= MAX_RUNS_LIMIT:
        raise InvalidSchedule(f"'max_runs' must be between 1 and {MAX_RUNS_LIMIT}, got {value}")
    return value


def policy_of(obj: Mapping[Any, Any]) -> SchedulePolicy:
    """The policies of a schedule object (its other keys are ignored here)."""
    if not any(k in obj for k in POLICY_KEYS):
        return DEFAULT_POLICY
    overlap = obj.get("overlap", "skip")
    if overlap not in OVERLAP_MODES:
        raise InvalidSchedule(f"'overlap' must be one of {', '.join(map(repr, OVERLAP_MODES))}, got {_show(overlap)}")
    nb = obj.get("not_before")
    na = obj.get("not_after")
    policy = SchedulePolicy(
        overlap=str(overlap),
        catch_up=None if obj.get("catch_up") is None else _duration("catch_up", obj["catch_up"]),
        not_before=None if nb is None else _instant("not_before", nb),
        not_after=None if na is None else _instant("not_after", na),
        max_runs=None if obj.get("max_runs") is None else _max_runs(obj["max_runs"]),
        jitter=None if obj.get("jitter") is None else _duration("jitter", obj["jitter"]),
        expect=None if obj.get("expect") is None else _duration("expect", obj["expect"]),
    )
    if policy.not_before is not None and policy.not_after is not None and policy.not_after < policy.not_before:
        after, before = policy.not_after.isoformat(), policy.not_before.isoformat()
        raise InvalidSchedule(f"'not_after' ({after}) is earlier than 'not_before' ({before})")
    return policy


def parse_policy(value: object) -> SchedulePolicy:
    """:func:`policy_of` a schedule given as a JSON object or JSON text."""
    if isinstance(value, str | bytes | bytearray):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise InvalidSchedule("schedule is not valid JSON") from None
    if not isinstance(value, Mapping):
        raise InvalidSchedule(f"schedule must be a JSON object, got {type(value).__name__}")
    return policy_of(value)
