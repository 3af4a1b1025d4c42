"""The size limits of what registration accepts, and the reading that flags a
stored row over one.

docs/architecture.md, section "The modules, in detail" (engine/limits.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from alma_schedule.errors import InvalidInput, RegistrationRefused
from alma_schedule.model import Routine, RoutineSpec
from alma_schedule.model.money import usd_micros
from alma_schedule.settings import Settings, env_name

from .revision import canonical_json, nesting_depth

__all__ = ["MONEY_FIELDS", "Limits", "check_registration", "over_limits"]

#: The budget fields that name a money cap in USD (see ``runners.governed.money``).
MONEY_FIELDS: tuple[str, ...] = ("per_turn_usd", "per_run_usd", "daily_usd")


@dataclass(frozen=True, slots=True)
class Limits:
    """The four limits, read from :class:`Settings`."""

    definition_bytes: int = 65_536
    schedule_bytes: int = 4_096
    nesting_depth: int = 32
    cap_usd: int = 1_000_000

    @classmethod
    def from_settings(cls, s: Settings) -> Limits:
        return cls(s.max_definition_bytes, s.max_schedule_bytes, s.max_nesting_depth, s.max_cap_usd)


def _setting(name: str, value: int) -> str:
    return f"{name} ({value}; {env_name(name)})"


def _body(what: str, value: Any, max_bytes: int, max_bytes_name: str, limits: Limits) -> Iterator[tuple[str, str]]:
    """The breaches of one JSON body (``definition`` or ``schedule``): depth first, then size."""
    if isinstance(value, (str, bytes, bytearray)):  # JSON text (a schedule may be given so)
        size = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else len(value)
    else:
        depth = nesting_depth(value, limits.nesting_depth)
        if depth > limits.nesting_depth:
            yield (
                "max_nesting_depth",
                (
                    f"{what} is nested deeper than {limits.nesting_depth} levels, "
                    f"over {_setting('max_nesting_depth', limits.nesting_depth)}"
                ),
            )
            return
        try:
            size = len(canonical_json(value).encode("utf-8", "surrogatepass"))
        except InvalidInput:
            return  # not JSON: the registration's own checks refuse it, naming why
    if size > max_bytes:
        yield max_bytes_name, (f"{what} is {size} bytes of canonical JSON, over {_setting(max_bytes_name, max_bytes)}")


def _caps(definition: Mapping[str, Any], limits: Limits) -> Iterator[tuple[str, str]]:
    budget = definition.get("budget")
    if not isinstance(budget, Mapping):
        return
    for name in MONEY_FIELDS:
        value = budget.get(name)
        if isinstance(value, Mapping):
            value = value.get("usd")
        if value is None:
            continue
        try:
            usd_micros(name, value, max_usd=limits.cap_usd, setting=f"max_cap_usd, {env_name('max_cap_usd')}")
        except RegistrationRefused as exc:
            yield "max_cap_usd", str(exc)


def breaches(schedule: Any, definition: Any, limits: Limits) -> Iterator[tuple[str, str]]:
    """Each limit the bodies exceed, lazily, as ``(setting name, one-line message)``."""
    yield from _body("definition", definition, limits.definition_bytes, "max_definition_bytes", limits)
    yield from _body("schedule", schedule, limits.schedule_bytes, "max_schedule_bytes", limits)
    if isinstance(definition, Mapping) and nesting_depth(definition, limits.nesting_depth) <= limits.nesting_depth:
        yield from _caps(definition, limits)


def check_registration(spec: RoutineSpec, settings: Settings) -> None:
    """Refuse (:class:`RegistrationRefused`, one line naming the setting) a spec over a limit."""
    for _, message in breaches(spec.schedule, spec.definition, Limits.from_settings(settings)):
        raise RegistrationRefused(message)


def over_limits(routine: Routine, settings: Settings) -> tuple[str, ...]:
    """The names of the limits a stored routine exceeds (it keeps running; ``routines list`` flags it)."""
    names: list[str] = []
    for name, _ in breaches(routine.schedule, routine.definition, Limits.from_settings(settings)):
        if name not in names:
            names.append(name)
    return tuple(names)
