"""The astronomical reference of the solar tests: ``ephem`` set up exactly as Celery's ``solar`` sets it.

Sea level, no atmosphere in ephem (``pressure = 0``: the standard refraction is in the horizon,
``-0:34`` for sunrise and sunset on the upper limb), the twilights on the sun's centre; a day without
the event (``CircumpolarError``) is skipped from the next antitransit on, as Celery skips it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import ephem

from alma_schedule.core.solar import EVENTS

HORIZON = {"dawn_astronomical": "-18", "dawn_nautical": "-12", "dawn_civil": "-6", "sunrise": "-0:34"}
HORIZON |= {"solar_noon": "0", "sunset": "-0:34", "dusk_civil": "-6", "dusk_nautical": "-12"}
HORIZON |= {"dusk_astronomical": "-18"}
METHOD = {"rise": "next_rising", "set": "next_setting", "noon": "next_transit"}
#: 40 latitudes from -66 to 66 and 12 longitudes, the grid of the comparison.
LATITUDES = [round(-66 + i * 132 / 39, 4) for i in range(40)]
LONGITUDES = [-165.0 + 30 * j for j in range(12)]
GRAZING = 0.01  # degrees a minute: slower than this at the event, the day must agree and 30 min is allowed
TOUCH = 0.001  # degrees: ten times the two models' difference in the sun's altitude (0.0001, sd)


def _date(u: float) -> ephem.Date:
    return ephem.Date(datetime.fromtimestamp(u, UTC).replace(tzinfo=None))


def _epoch(d: ephem.Date) -> float:
    return d.datetime().replace(tzinfo=UTC).timestamp()


def observer(event: str, lat: float, lon: float) -> ephem.Observer:
    o = ephem.Observer()
    o.lat, o.lon, o.elev, o.pressure, o.horizon = str(lat), str(lon), 0, 0, HORIZON[event]
    return o


def next_event(event: str, lat: float, lon: float, after: float, days: int = 400) -> float | None:
    """ephem's first ``event`` after epoch second ``after`` (days without it skipped), or None."""
    o = observer(event, lat, lon)
    kind = EVENTS[event][0]
    kwargs = {"use_center": True} if event.startswith(("dawn_", "dusk_")) else {}
    start = _date(after)
    for _ in range(days):
        o.date = start
        try:
            return _epoch(getattr(o, METHOD[kind])(ephem.Sun(), start=start, **kwargs))
        except ephem.CircumpolarError:
            start = o.next_antitransit(ephem.Sun(), start=start)
    return None


def altitude_rate(lat: float, lon: float, at: float) -> float:
    """How fast the sun's altitude changes at ``at``, degrees a minute (ephem's sun)."""
    o = ephem.Observer()
    o.lat, o.lon, o.elev, o.pressure = str(lat), str(lon), 0, 0
    alts = []
    for u in (at - 30, at + 30):
        o.date = _date(u)
        alts.append(math.degrees(ephem.Sun(o).alt))
    return abs(alts[1] - alts[0])


def allowed(event: str, lat: float, lon: float, reference: float) -> float:
    """The tolerance, in seconds, of a fire against ephem's ``reference``: 60 s, or 30 min when grazing."""
    if EVENTS[event][0] == "noon":
        return 60.0
    return 60.0 if altitude_rate(lat, lon, reference) >= GRAZING else 1800.0


def touching(event: str, lat: float, lon: float, at: float) -> bool:
    """Whether the sun only touches the event's altitude near ``at``: at the transit or antitransit
    nearest it, within :data:`TOUCH` degrees of it, so whether that day has the event at all is below
    the precision of either model (a day on which ephem and the core may disagree)."""
    o = observer(event, lat, lon)
    sun = ephem.Sun()
    o.date = _date(at)
    limb = 0.0 if event.startswith(("dawn_", "dusk_")) else 1.0
    for meridian in (o.previous_transit, o.next_transit, o.previous_antitransit, o.next_antitransit):
        o.date = meridian(sun, start=_date(at))
        sun.compute(o)
        if abs(math.degrees(sun.alt) + limb * math.degrees(sun.radius) - math.degrees(o.horizon)) < TOUCH:
            return True
        o.date = _date(at)
    return False
