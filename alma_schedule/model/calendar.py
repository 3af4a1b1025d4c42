"""A business calendar as the store keeps it: its definition (country, subdivision, market, weekend,
dates added and removed), the holidays resolved from it for a span of years, and its version.

Calendars are SYSTEM data: named once for the whole installation by an operator, read by the
routines of every scope. docs/architecture.md, section "The modules, in detail" (model/calendar.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from alma_schedule.core.calendar import WEEKDAYS, BusinessDays
from alma_schedule.core.types import check_calendar_name
from alma_schedule.errors import InvalidInput, InvalidSchedule

__all__ = ["MAX_YEARS", "Calendar"]

#: The most years one calendar holds (``--years``).
MAX_YEARS = 50
MAX_HOLIDAYS = 10_000


def _day(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what!r} must hold ISO dates (YYYY-MM-DD), got {type(value).__name__}")
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise InvalidInput(f"{what!r}: {value[:40]!r} is not an ISO date (YYYY-MM-DD)") from None


@dataclass(frozen=True, slots=True)
class Calendar:
    """One named calendar. ``holidays`` are ``(ISO date, name)`` pairs in date order, resolved for
    ``first_year``..``last_year`` (inclusive); ``weekend`` holds ``date.weekday()`` numbers (Monday 0).
    ``version`` counts its stored definitions (1 on insert, + 1 on each change)."""

    name: str
    country: str
    first_year: int
    last_year: int
    holidays: tuple[tuple[str, str], ...] = ()
    subdiv: str | None = None
    market: str | None = None
    weekend: tuple[int, ...] = (5, 6)
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    version: int = 0
    updated_at: datetime | None = None

    def __post_init__(self) -> None:
        try:
            check_calendar_name(self.name)
        except InvalidSchedule as exc:
            raise InvalidInput(str(exc)) from None
        for key in ("country", "subdiv", "market"):
            value = getattr(self, key)
            if (key == "country" or value is not None) and (not isinstance(value, str) or not 0 < len(value) <= 32):
                raise InvalidInput(f"{key!r} must be a code of up to 32 characters, got {str(value)[:40]!r}")
        years = (self.first_year, self.last_year)
        if any(isinstance(y, bool) or not isinstance(y, int) or not 1 <= y <= 9998 for y in years):
            raise InvalidInput(f"'years' must be calendar years, got {years!r}")
        if not 0 <= self.last_year - self.first_year < MAX_YEARS:
            raise InvalidInput(f"'years' must span 1 to {MAX_YEARS} years, got {self.first_year}-{self.last_year}")
        if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 6 for d in self.weekend):
            raise InvalidInput(f"'weekend' must hold weekday numbers 0-6, got {self.weekend!r}")
        object.__setattr__(self, "weekend", tuple(sorted(set(self.weekend))))
        object.__setattr__(self, "added", tuple(sorted({_day(d, "add") for d in self.added})))
        object.__setattr__(self, "removed", tuple(sorted({_day(d, "remove") for d in self.removed})))
        if len(self.holidays) > MAX_HOLIDAYS:
            raise InvalidInput(f"'holidays' holds at most {MAX_HOLIDAYS} days")
        pairs = tuple(sorted((_day(d, "holidays"), str(n)[:200]) for d, n in self.holidays))
        object.__setattr__(self, "holidays", pairs)

    @property
    def weekend_names(self) -> str:
        return ",".join(WEEKDAYS[d] for d in self.weekend)

    @property
    def runs_out(self) -> date:
        """The last day the holidays are known for (after it only the weekend closes a day)."""
        return date(self.last_year, 12, 31)

    def business_days(self) -> BusinessDays:
        """The resolved calendar the fire functions read (:mod:`alma_schedule.core.calendar`)."""
        return BusinessDays(
            name=self.name,
            version=self.version,
            weekend=frozenset(self.weekend),
            holidays={date.fromisoformat(d).toordinal(): n for d, n in self.holidays},
            first=date(self.first_year, 1, 1).toordinal(),
            last=self.runs_out.toordinal(),
        )

    def definition(self) -> dict[str, Any]:
        """What the calendar was made from (the store's ``spec`` column)."""
        return {
            "country": self.country,
            "subdiv": self.subdiv,
            "market": self.market,
            "weekend": list(self.weekend),
            "add": list(self.added),
            "remove": list(self.removed),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.definition(),
            "weekend": self.weekend_names,
            "years": [self.first_year, self.last_year],
            "holidays": [list(p) for p in self.holidays],
            "version": self.version,
            "updated_at": None if self.updated_at is None else self.updated_at.isoformat(),
        }

    @classmethod
    def from_parts(
        cls,
        name: str,
        spec: dict[str, Any],
        holidays: list[Any],
        first_year: int,
        last_year: int,
        version: int,
        updated_at: datetime | None,
    ) -> Calendar:
        """A stored row back (``spec`` as :meth:`definition` wrote it)."""
        return cls(
            name=name,
            country=spec["country"],
            subdiv=spec.get("subdiv"),
            market=spec.get("market"),
            weekend=tuple(spec.get("weekend", (5, 6))),
            added=tuple(spec.get("add", ())),
            removed=tuple(spec.get("remove", ())),
            first_year=first_year,
            last_year=last_year,
            holidays=tuple((str(d), str(n)) for d, n in holidays),
            version=version,
            updated_at=updated_at,
        )
