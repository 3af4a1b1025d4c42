"""Time zones: which zone data is read, validation with suggestions, and constant-offset segments.

docs/architecture.md, section "The modules, in detail" (core/zones.py).
"""

from __future__ import annotations

import difflib
import importlib.resources
import zoneinfo
from bisect import bisect_right
from datetime import date, datetime, timedelta
from functools import lru_cache

from alma_schedule.core.cron import EPOCH_ORDINAL
from alma_schedule.errors import InvalidSchedule

Segment = tuple[int, int, int, int]  # start, end, offset, offset of the previous segment


@lru_cache(maxsize=1)
def available_zones() -> frozenset[str]:
    """The IANA names ``zoneinfo`` can load with the deployed tzdata."""
    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


def check_zone(tz: object) -> str:
    """Return ``tz`` if it names a loadable IANA zone; else raise naming the closest match."""
    if not isinstance(tz, str):
        raise InvalidSchedule(f"'tz' must be a string (an IANA time zone name), got {type(tz).__name__}")
    zones = available_zones()
    if tz in zones:
        return tz
    shown = tz if len(tz) <= 60 else tz[:60] + "..."
    hint = ""
    if 0 < len(tz) <= 64:
        folded = {z.lower(): z for z in zones}
        close = [folded[tz.lower()]] if tz.lower() in folded else []
        close = close or difflib.get_close_matches(tz, sorted(zones), n=1, cutoff=0.6)
        if close:
            hint = f" (did you mean {close[0]!r}?)"
    raise InvalidSchedule(f"unknown time zone {shown!r}{hint}")


@lru_cache(maxsize=1)
def zone_data() -> str:
    """The zone data :func:`get_zone` reads: ``"tzdata <IANA version>"`` or ``"system"``."""
    try:
        import tzdata
    except ModuleNotFoundError:
        return "system"
    return f"tzdata {tzdata.IANA_VERSION}"


@lru_cache(maxsize=1024)
def get_zone(key: str) -> zoneinfo.ZoneInfo:
    """The zone ``key`` from the ``tzdata`` package (the pinned rules), else from the system."""
    if zone_data() != "system" and key != "UTC" and key in available_zones():  # a known name, never a path
        try:
            resource = importlib.resources.files("tzdata.zoneinfo").joinpath(*key.split("/"))
            with resource.open("rb") as fh:
                return zoneinfo.ZoneInfo.from_file(fh, key=key)
        except (OSError, ValueError):  # not in the package (or not a zone file): the system's copy
            pass
    return zoneinfo.ZoneInfo(key)


def offset_at(zone: zoneinfo.ZoneInfo, u: int) -> int:
    """UTC offset in seconds of ``zone`` at epoch second ``u``."""
    off = datetime.fromtimestamp(u, zone).utcoffset()
    assert off is not None
    return off // timedelta(seconds=1)


@lru_cache(maxsize=16384)
def _year_table(key: str, year: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(boundaries, offsets, previous offsets) for one UTC calendar year of zone ``key``."""
    zone = get_zone(key)
    start = (date(year, 1, 1).toordinal() - EPOCH_ORDINAL) * 86400
    end = (date(year, 12, 31).toordinal() + 1 - EPOCH_ORDINAL) * 86400
    prev_u = start - 1 if year > 1 else start
    cur = offset_at(zone, prev_u)
    bounds, offs, poffs = [start], [], [cur]
    first = offset_at(zone, start)
    if first != cur:  # a real transition exactly at 1 January 00:00 UTC
        cur = first
    offs.append(cur)
    cur_u = start
    for p in [*range(start + 86400, end, 86400), end - 1]:
        o = offset_at(zone, p)
        while o != cur:
            lo, hi = cur_u, p
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if offset_at(zone, mid) == cur:
                    lo = mid
                else:
                    hi = mid
            new = offset_at(zone, hi)
            bounds.append(hi)
            poffs.append(cur)
            offs.append(new)
            cur, cur_u = new, hi
        cur_u = p
    bounds.append(end)
    return tuple(bounds), tuple(offs), tuple(poffs)


def segment_at(key: str, u: int) -> Segment:
    """The constant-offset segment of zone ``key`` that contains epoch second ``u``."""
    year = date.fromordinal(u // 86400 + EPOCH_ORDINAL).year
    bounds, offs, poffs = _year_table(key, year)
    i = bisect_right(bounds, u) - 1
    return bounds[i], bounds[i + 1], offs[i], poffs[i]


def format_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    h, rem = divmod(abs(seconds), 3600)
    return f"{sign}{h:02d}:{rem // 60:02d}"
