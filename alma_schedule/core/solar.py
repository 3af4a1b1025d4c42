"""Solar events (sunrise, sunset, twilights, solar noon) as pure functions of epoch seconds.

Each solar day runs from an antitransit of the sun to the next (:mod:`.sun` places it); an event is
the crossing of its altitude between the antitransit and the transit (dawn, sunrise) or the transit
and the next antitransit (sunset, dusk), and the day has none when the sun stays on one side.
docs/architecture.md, "Solar schedules".
"""

from __future__ import annotations

import difflib
import math
from functools import lru_cache

from alma_schedule.core.sun import altitude as sun_altitude
from alma_schedule.core.sun import hour_angle, semidiameter
from alma_schedule.errors import InvalidSchedule

__all__ = ["EVENTS", "SEARCH_DAYS", "check_solar", "event_on_day", "solar_latest", "solar_next"]

_DAY = 86400
_RAD = math.pi / 180

#: event -> (kind, altitude in degrees or None for "upper limb with refraction"); Celery's nine.
EVENTS: dict[str, tuple[str, float | None]] = {
    "dawn_astronomical": ("rise", -18.0),
    "dawn_nautical": ("rise", -12.0),
    "dawn_civil": ("rise", -6.0),
    "sunrise": ("rise", None),
    "solar_noon": ("noon", None),
    "sunset": ("set", None),
    "dusk_civil": ("set", -6.0),
    "dusk_nautical": ("set", -12.0),
    "dusk_astronomical": ("set", -18.0),
}
#: How many solar days the next/latest search walks before it gives up (a polar night is shorter).
SEARCH_DAYS = 370
_REFRACTION = 34 / 60  # standard refraction at the horizon, degrees


def _coordinate(name: str, value: object, limit: int) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSchedule(f"{name!r} must be a number of degrees, got {type(value).__name__}")
    if not math.isfinite(value):
        raise InvalidSchedule(f"{name!r} must be a finite number of degrees, got {value!r}")
    if not -limit <= value <= limit:
        raise InvalidSchedule(f"{name!r} {value!r} is out of range (-{limit} to {limit} degrees)")
    return float(value)


def check_solar(event: object, lat: object, lon: object) -> tuple[str, float, float]:
    """``(event, lat, lon)`` if they name a solar event seen from a place; else raise naming the field."""
    if not isinstance(event, str):
        raise InvalidSchedule(f"'solar' must be an event name (a string), got {type(event).__name__}")
    if event not in EVENTS:
        shown = event if len(event) <= 40 else event[:40] + "..."
        close = difflib.get_close_matches(event.strip().lower(), list(EVENTS), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (one of {', '.join(EVENTS)})"
        raise InvalidSchedule(f"unknown solar event {shown!r} in 'solar'{hint}")
    y, x = _coordinate("lat", lat, 90), _coordinate("lon", lon, 180)
    if abs(y) == 90 and EVENTS[event][0] != "noon":
        raise InvalidSchedule(
            f"'lat' {lat!r} is a pole: the sun's altitude there does not change with the hour, so {event!r} "
            "has no daily instant (only 'solar_noon' is kept at a pole)"
        )
    return event, y, x


def _target(u: float, altitude: float | None) -> float:
    """The event's altitude of the sun's centre at ``u`` (None: the upper limb at the refracted horizon)."""
    return -_REFRACTION - semidiameter(u) if altitude is None else altitude


def _excess(u: float, lat: float, lon: float, altitude: float | None) -> float:
    """The sun's altitude at ``u`` minus the event's."""
    return sun_altitude(u, lat, lon) - _target(u, altitude)


@lru_cache(maxsize=65536)
def _edge(u: float, lat: float, lon: float) -> float:
    """:func:`sun_altitude` at a day's transit or antitransit, shared by the nine events."""
    return sun_altitude(u, lat, lon)


def _meridian(guess: float, lon: float, target: float) -> float:
    """The instant near ``guess`` when the hour angle is ``target`` (0: transit, -180: antitransit)."""
    u = guess
    for _ in range(8):
        step = ((hour_angle(u, lon) - target + 180) % 360 - 180) / 360 * _DAY
        u -= step
        if abs(step) < 0.2:
            break
    return u


@lru_cache(maxsize=65536)
def _transit(day: int, lon: float) -> float:
    return _meridian((day + 0.5 - lon / 360) * _DAY, lon, 0.0)


@lru_cache(maxsize=65536)
def _antitransit(day: int, lon: float) -> float:
    """The antitransit that opens solar day ``day``."""
    return _meridian(_transit(day, lon) - _DAY / 2, lon, -180.0)


def _illinois(lo: float, hi: float, f_lo: float, f_hi: float, lat: float, lon: float, alt: float | None) -> float:
    """The instant in [lo, hi] where the excess changes sign (Illinois regula falsi, to 0.05 s)."""
    side, mid, f_mid = 0, lo, f_lo
    for _ in range(100):
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        f_mid = _excess(mid, lat, lon, alt)
        if f_mid == 0:
            return mid
        if (f_mid > 0) == (f_hi > 0):
            hi, f_hi = mid, f_mid
            f_lo, side = (f_lo / 2 if side == 1 else f_lo), 1
        else:
            lo, f_lo = mid, f_mid
            f_hi, side = (f_hi / 2 if side == -1 else f_hi), -1
        if hi - lo < 0.05:
            break
    return (lo + hi) / 2


def _crossing(
    edge: float, noon: float, a_edge: float, a_noon: float, lat: float, lon: float, alt: float | None
) -> float:
    """The crossing between a (anti)transit ``edge`` and the transit ``noon``, given the altitudes at both.

    First guess: ``sin(alt) = a + b cos(H)`` through both ends; then a 3-minute bracket around it."""
    target = _target(noon, alt)
    a, b = (
        (math.sin(a_noon * _RAD) + math.sin(a_edge * _RAD)) / 2,
        (math.sin(a_noon * _RAD) - math.sin(a_edge * _RAD)) / 2,
    )
    h = math.acos(max(-1.0, min(1.0, (math.sin(target * _RAD) - a) / b)))
    guess = noon + math.copysign(h / (2 * math.pi) * _DAY, edge - noon)
    lo, hi = sorted((edge, noon))
    f_lo, f_hi = (a_edge - target, a_noon - target) if edge < noon else (a_noon - target, a_edge - target)
    near_lo, near_hi = max(lo, guess - 90), min(hi, guess + 90)
    g_lo, g_hi = _excess(near_lo, lat, lon, alt), _excess(near_hi, lat, lon, alt)
    if (g_lo > 0) != (g_hi > 0):
        return _illinois(near_lo, near_hi, g_lo, g_hi, lat, lon, alt)
    return _illinois(lo, hi, f_lo, f_hi, lat, lon, alt)


@lru_cache(maxsize=65536)
def event_on_day(event: str, lat: float, lon: float, day: int) -> int | None:
    """Epoch second (rounded) of ``event`` on solar day ``day`` (days since 1970-01-01, the one
    whose transit is near that UTC date's local noon at ``lon``), or None when it does not occur."""
    kind, altitude = EVENTS[event]
    noon = _transit(day, lon)
    if kind == "noon":
        return round(noon)
    a_noon = _edge(noon, lat, lon)
    if a_noon <= _target(noon, altitude):  # the sun stays below the altitude all day
        return None
    edge = _antitransit(day, lon) if kind == "rise" else _antitransit(day + 1, lon)
    a_edge = _edge(edge, lat, lon)
    if a_edge >= _target(edge, altitude):  # it stays above
        return None
    return round(_crossing(edge, noon, a_edge, a_noon, lat, lon, altitude))


def _day_of(u: int, lon: float) -> int:
    return math.floor(u / _DAY + lon / 360)


def solar_next(event: str, lat: float, lon: float, a: int, days: int = SEARCH_DAYS) -> int | None:
    """The first ``event`` strictly after epoch second ``a``, within ``days`` solar days, or None."""
    first = _day_of(a, lon) - 1
    for day in range(first, first + days + 2):
        f = event_on_day(event, lat, lon, day)
        if f is not None and f > a:
            return f
    return None


def solar_latest(event: str, lat: float, lon: float, n: int, floor: int, days: int = SEARCH_DAYS) -> int | None:
    """The last ``event`` at or before epoch second ``n`` and at or after ``floor``, or None."""
    last = _day_of(n, lon) + 1
    for day in range(last, last - days - 2, -1):
        f = event_on_day(event, lat, lon, day)
        if f is not None and f <= n:
            return f if f >= floor else None
        if (day + 1) * _DAY - lon / 360 * _DAY + _DAY < floor:  # the day ended before the floor
            return None
    return None


def days_without(event: str, lat: float, lon: float, fire: int) -> tuple[int, int]:
    """``(first day, count)`` of the run of solar days without ``event`` just before the day of
    ``fire`` (an instant of the event); count 0 when the day before had one. Days since 1970-01-01."""
    guess = _day_of(fire, lon)
    day = next((d for d in (guess, guess - 1, guess + 1) if event_on_day(event, lat, lon, d) == fire), guess)
    count = 0
    while count < SEARCH_DAYS and event_on_day(event, lat, lon, day - count - 1) is None:
        count += 1
    return day - count, count
