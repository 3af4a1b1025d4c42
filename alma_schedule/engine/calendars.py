"""Business calendars for the engine: a calendar resolved from the ``holidays`` package (the
``calendars`` extra), the store's calendars installed into this process for the fire functions
(once per tick that has routines due: ONE small read, never one per fire), the warning a year
before a calendar runs out, and the re-derivation of next fires after a change.

Calendars are SYSTEM data: an operator names them for the whole installation; routines of every
scope refer to them by name. docs/architecture.md, section "The modules, in detail" (engine/calendars.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.core import Cron, parse_schedule
from alma_schedule.core.calendar import WEEKDAYS, install_calendars, suggest
from alma_schedule.errors import InvalidInput, InvalidSchedule, missing_extra
from alma_schedule.model.calendar import MAX_YEARS, Calendar
from alma_schedule.stores.base import Store

log = logging.getLogger("alma_schedule.engine")

__all__ = [
    "WARN_AHEAD",
    "check_calendar_of",
    "install_from",
    "parse_weekend",
    "resolve_calendar",
    "running_out",
    "tick_calendars",
]

#: A calendar whose holidays end within this long is named by the tick report.
WARN_AHEAD = timedelta(days=365)
ADDED = "added"


def _holidays_module() -> Any:
    try:
        import holidays
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "calendars", "business calendars") from None
    return holidays


def parse_weekend(text: str) -> tuple[int, ...]:
    """``sat,sun`` -> ``(5, 6)``; an empty text is no weekend. :class:`InvalidInput` naming ``weekend``."""
    days = [d.strip().lower() for d in text.split(",") if d.strip()]
    bad = [d for d in days if d not in WEEKDAYS]
    if bad:
        raise InvalidInput(f"'weekend': {bad[0][:20]!r} is not a day (use {', '.join(WEEKDAYS)})")
    return tuple(sorted({WEEKDAYS.index(d) for d in days}))


def _source(lib: Any, country: str, subdiv: str | None, market: str | None, years: range) -> Any:
    """The holidays of ``market`` (a market's closing days replace the country's) or of ``country``
    (with ``subdiv``); :class:`InvalidInput` naming the field the package does not know."""
    countries = lib.list_supported_countries()
    if country not in countries:
        raise InvalidInput(
            f"'country' {country[:20]!r} is not known to the holidays package{suggest(country, countries)}"
        )
    if subdiv is not None and subdiv not in countries[country]:
        raise InvalidInput(
            f"'subdiv' {subdiv[:20]!r} is not a subdivision of {country}{suggest(subdiv, countries[country])}"
        )
    if market is not None:
        markets = lib.list_supported_financial()
        if market not in markets:
            raise InvalidInput(
                f"'market' {market[:20]!r} is not known to the holidays package{suggest(market, markets)}"
            )
        return lib.financial_holidays(market, years=years)
    return lib.country_holidays(country, subdiv=subdiv, years=years)


def resolve_calendar(
    name: str,
    *,
    country: str,
    first_year: int,
    years: int = 5,
    subdiv: str | None = None,
    market: str | None = None,
    weekend: Sequence[int] = (5, 6),
    add: Iterable[str] = (),
    remove: Iterable[str] = (),
) -> Calendar:
    """The calendar ``name`` for ``years`` years from ``first_year``: the package's holidays, the
    dates of ``add`` (named ``added``) and without those of ``remove``. Writes nothing."""
    if isinstance(years, bool) or not isinstance(years, int) or not 1 <= years <= MAX_YEARS:
        raise InvalidInput(f"'years' must be between 1 and {MAX_YEARS}, got {years!r}")
    draft = Calendar(
        name, country, first_year, first_year + years - 1, (), subdiv, market, tuple(weekend), tuple(add), tuple(remove)
    )
    span = range(draft.first_year, draft.last_year + 1)
    found = _source(_holidays_module(), country, subdiv, market, span)
    days: dict[str, str] = {d.isoformat(): str(n) for d, n in sorted(found.items()) if d.year in span}
    for d in draft.added:
        days.setdefault(d, ADDED)
    for d in draft.removed:
        days.pop(d, None)
    return Calendar(
        name, country, draft.first_year, draft.last_year, tuple(days.items()), subdiv, market,
        draft.weekend, draft.added, draft.removed,
    )  # fmt: skip


def install_from(store: Store) -> list[Calendar]:
    """Read the store's calendars (ONE query) and install them for this process's fire functions."""
    calendars = store.list_calendars()
    install_calendars(c.business_days() for c in calendars)
    return calendars


def running_out(calendars: Iterable[Calendar], now: datetime) -> list[str]:
    """A warning per calendar whose holidays end within :data:`WARN_AHEAD` of ``now``."""
    soon = (now + WARN_AHEAD).date()
    return [
        f"calendar {c.name!r} runs out on {c.runs_out.isoformat()}: `alma-schedule calendars refresh {c.name}`"
        for c in calendars
        if c.runs_out < soon
    ]


def check_calendar_of(schedule: Any, store: Store) -> None:
    """Registration: a cron schedule's ``calendar`` names a stored calendar (did-you-mean), which is
    installed for the fire functions that compute its first fires. Other schedules: nothing."""
    try:
        parsed = parse_schedule(schedule)
    except InvalidSchedule:
        return  # the registration's own parse says why
    if not isinstance(parsed, Cron) or parsed.calendar is None:
        return
    calendars = install_from(store)
    if parsed.calendar not in {c.name for c in calendars}:
        names = [c.name for c in calendars]
        raise InvalidSchedule(
            f"'calendar' {parsed.calendar!r} is not a known calendar{suggest(parsed.calendar, names)}"
        )


def tick_calendars(store: Store, now: datetime) -> tuple[str, ...]:
    """The tick's step: install the store's calendars (ONE read) and warn of those that run out
    within a year (logged, and named in the tick report's ``warnings``)."""
    warnings = tuple(running_out(install_from(store), now))
    for warning in warnings:
        log.warning("%s", warning)
    return warnings
