"""Business days: a calendar's closed days (weekend and holidays) and the roll of a cron's fire off
them (``skip``, ``following``, ``preceding``), as pure functions of the resolved calendar.

docs/architecture.md, section "The modules, in detail" (core/calendar.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time

from alma_schedule.core.cron import EPOCH_ORDINAL, CronSpec, next_match
from alma_schedule.core.zones import get_zone
from alma_schedule.errors import InvalidSchedule

__all__ = [
    "ROLLS",
    "WEEKDAYS",
    "BusinessDays",
    "Rolled",
    "business_days",
    "check_roll",
    "install_calendars",
    "installed_names",
    "roll_fire",
    "suggest",
]

#: What happens to a fire on a closed day: dropped, moved to the next or to the previous business day.
ROLLS = ("skip", "following", "preceding")
#: ``date.weekday()`` order: the names ``--weekend`` reads.
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
WEEKEND_NAME = "weekend"
MAX_RUN = 366  # a run of closed days longer than a year: no business day to roll onto


@dataclass(frozen=True, eq=False)
class BusinessDays:
    """A resolved calendar: its weekend (``date.weekday()`` numbers), its holidays (ordinal -> name)
    and the days they were resolved for (``first``..``last`` ordinals; outside them only the weekend
    closes a day). Equal by content (``stamp``), so a cache keyed by it never serves another calendar."""

    name: str
    version: int
    weekend: frozenset[int]
    holidays: Mapping[int, str]
    first: int
    last: int
    stamp: int = field(init=False)

    def __post_init__(self) -> None:
        items = tuple(sorted(self.holidays.items()))
        key = (self.name, self.version, tuple(sorted(self.weekend)), items, self.first, self.last)
        object.__setattr__(self, "stamp", hash(key))

    def __hash__(self) -> int:
        return self.stamp

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BusinessDays):
            return NotImplemented
        return self.stamp == other.stamp and (self.name, self.version, self.weekend, dict(self.holidays)) == (
            other.name,
            other.version,
            other.weekend,
            dict(other.holidays),
        )

    def closed(self, ordinal: int) -> str | None:
        """Why day ``ordinal`` is not a business day (the holiday's name, or ``weekend``), or None."""
        name = self.holidays.get(ordinal)
        if name is not None:
            return name
        return WEEKEND_NAME if date.fromordinal(ordinal).weekday() in self.weekend else None


@dataclass(frozen=True, slots=True)
class Rolled:
    """One nominal fire on a calendar: ``instant`` it runs at (None: skipped), ``why`` its day is
    closed (None: a business day, not moved), and whether it was skipped because another fire of the
    routine runs on the day it rolled onto (``collided``: ``skipped(calendar)`` so nothing runs twice)."""

    nominal: int
    instant: int | None
    why: str | None = None
    collided: bool = False

    @property
    def moved(self) -> bool:
        return self.instant is not None and self.instant != self.nominal


def check_roll(value: object) -> str:
    """``roll`` is one of :data:`ROLLS` (a typed refusal naming the field otherwise)."""
    if value not in ROLLS:
        raise InvalidSchedule(f"'roll' must be one of {', '.join(map(repr, ROLLS))}, got {value!r}"[:200])
    return str(value)


def local_day(zone: str, u: int) -> tuple[int, time]:
    """The local date (ordinal) and wall time of epoch second ``u`` in ``zone``."""
    local = datetime.fromtimestamp(u, get_zone(zone))
    return local.toordinal(), local.time()


def day_start(zone: str, ordinal: int) -> int:
    """Epoch second of local midnight of day ``ordinal`` in ``zone``."""
    return int(datetime.combine(date.fromordinal(ordinal), time(), tzinfo=get_zone(zone)).timestamp())


def _wall(ordinal: int, at: time | None = None) -> int:
    seconds = 0 if at is None else at.hour * 3600 + at.minute * 60 + at.second
    return (ordinal - EPOCH_ORDINAL) * 86400 + seconds


def _matches_between(spec: CronSpec, lo_wall: int, hi_wall: int) -> bool:
    """A matching wall minute in ``[lo_wall, hi_wall)``."""
    w = next_match(spec, lo_wall)
    return w is not None and w < hi_wall


def roll_fire(spec: CronSpec, zone: str, days: BusinessDays, roll: str, nominal: int) -> Rolled:
    """Where nominal fire ``nominal`` (epoch seconds) of cron ``spec`` read in ``zone`` runs on
    ``days`` under ``roll``. A fire on a business day runs as it is; on a closed day ``skip`` drops
    it, ``following``/``preceding`` move it to the same wall time on the next/previous business day,
    unless the cron has a fire of its own on that day or an earlier fire of the same run of closed
    days already rolled onto it (then it is skipped, ``collided``)."""
    d, at = local_day(zone, nominal)
    why = days.closed(d)
    if why is None:
        return Rolled(nominal, nominal)
    if roll == "skip":
        return Rolled(nominal, None, why)
    step = 1 if roll == "following" else -1
    target = d + step
    while days.closed(target) is not None:
        target += step
        if abs(target - d) > MAX_RUN:
            return Rolled(nominal, None, why)
    if _matches_between(spec, _wall(target), _wall(target + 1)):
        return Rolled(nominal, None, why, collided=True)
    first = target + 1 if roll == "preceding" else _run_start(days, d)
    if _matches_between(spec, _wall(first), _wall(d, at)):
        return Rolled(nominal, None, why, collided=True)
    local = datetime.combine(date.fromordinal(target), at, tzinfo=get_zone(zone))
    return Rolled(nominal, int(local.timestamp()), why)


def _run_start(days: BusinessDays, d: int) -> int:
    start = d
    while days.closed(start - 1) is not None and d - start < MAX_RUN:
        start -= 1
    return start


def run_bounds(days: BusinessDays, d: int) -> tuple[int, int]:
    """The closed days just before day ``d`` (or the run holding it) and just after it: the first
    day of the one and the last of the other (``d`` itself when there is none)."""
    end = d
    while days.closed(end + 1) is not None and end - d < MAX_RUN:
        end += 1
    return _run_start(days, d), end


# ---------------------------------------------------------------- the process's resolved calendars
# The store holds the calendars (system data, :mod:`alma_schedule.engine.calendars` reads them once
# per tick into this map); a cron schedule names one, and the fire functions read it here by name.
_INSTALLED: dict[str, BusinessDays] = {}


def install_calendars(calendars: Iterable[BusinessDays]) -> None:
    """Replace the calendars this process reads (one assignment: a reader sees the old or the new set)."""
    global _INSTALLED
    _INSTALLED = {c.name: c for c in calendars}


def installed_names() -> list[str]:
    return sorted(_INSTALLED)


def suggest(name: str, names: Iterable[str]) -> str:
    """`` (did you mean 'us'?)`` for the closest of ``names``, or nothing."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def business_days(name: str) -> BusinessDays:
    """The installed calendar ``name``; :class:`InvalidSchedule` naming ``calendar`` (did-you-mean)."""
    found = _INSTALLED.get(name)
    if found is None:
        raise InvalidSchedule(f"'calendar' {name!r} is not a known calendar{suggest(name, _INSTALLED)}"[:300])
    return found
