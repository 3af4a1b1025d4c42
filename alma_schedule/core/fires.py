"""When does a schedule fire: ``latest_fire``, ``next_fire``, ``next_fires`` and ``fire_id``.

docs/architecture.md, section "The modules, in detail" (core/fires.py).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

from alma_schedule.core.calendar import business_days
from alma_schedule.core.calendar_fires import cal_latest, cal_next, cal_nominal, collided_between
from alma_schedule.core.cron import next_match
from alma_schedule.core.cron_fires import _cron_next, cron_latest, cron_next
from alma_schedule.core.parse import parse_schedule
from alma_schedule.core.solar import solar_latest, solar_next
from alma_schedule.core.types import (
    After,
    At,
    Cron,
    Every,
    ScheduleValue,
    Solar,
    compile_cron,
    from_epoch,
    to_epoch,
)
from alma_schedule.core.zones import segment_at
from alma_schedule.errors import InvalidSchedule

_KINDS = (Cron, Every, At, Solar, After)


def _on_calendar(sched: Cron, u: int, *, latest: bool) -> int | None:
    """:func:`cron_latest` (at or before ``u``) or :func:`cron_next` (after ``u``) of a cron on its
    business calendar: the rolled instants, the skipped fires left out (:mod:`.calendar_fires`)."""
    days, roll = business_days(str(sched.calendar)), str(sched.roll)
    try:
        if latest:
            return cal_latest(sched.expr, sched.tz, days, roll, u)
        return cal_next(sched.expr, sched.tz, days, roll, u)
    except (OverflowError, ValueError):
        return None


def gap_walls(schedule: Cron, instant: int, limit: int = 4) -> tuple[list[int], int]:
    """Matching wall minutes that did not exist and were shifted to ``instant`` (fixed-time cron).

    Returns (wall seconds of up to ``limit`` matching gap minutes, offset after the gap).
    """
    spec, key = compile_cron(schedule.expr, schedule.tz)
    s, _, off, poff = segment_at(key, instant)
    found: list[int] = []
    if spec.wildcard or s != instant or poff >= off:
        return found, off
    w = next_match(spec, s + poff)
    while w is not None and w < s + off and len(found) < limit:
        found.append(w)
        w = next_match(spec, w + 60)
    return found, off


def as_schedule(schedule: object) -> ScheduleValue:
    if isinstance(schedule, _KINDS):
        return schedule
    return parse_schedule(schedule)


def _result(u: int | None) -> datetime | None:
    if u is None:
        return None
    try:
        return from_epoch(u)
    except OverflowError:
        return None


def latest_fire(schedule: ScheduleValue, registered_at: datetime, now: datetime) -> datetime | None:
    """The latest fire ``f`` with ``registered_at <= f <= now`` (aware UTC), or None."""
    sched = as_schedule(schedule)
    r = to_epoch(registered_at, "registered_at")
    n = to_epoch(now, "now")
    if n < r:
        return None
    f: int | None
    if isinstance(sched, Cron):
        f = cron_latest(sched.expr, sched.tz, n) if sched.calendar is None else _on_calendar(sched, n, latest=True)
    elif isinstance(sched, Every):
        step = sched.interval.days * 86400 + sched.interval.seconds
        if n - r < step:
            return None
        f = n - (n - r) % step
    elif isinstance(sched, Solar):
        f = solar_latest(sched.event, sched.lat, sched.lon, n, r)
    elif isinstance(sched, After):  # one fire, at the anchor (the store moves the anchor: fixed delay)
        f = r
    else:
        f = to_epoch(sched.when, "at")
        if f > n:
            return None
    if f is None or f < r:
        return None
    return _result(f)


def next_fire(schedule: ScheduleValue, registered_at: datetime, after: datetime) -> datetime | None:
    """The first fire ``f`` with ``f > after`` and ``f >= registered_at`` (aware UTC), or None."""
    sched = as_schedule(schedule)
    r = to_epoch(registered_at, "registered_at")
    a = max(to_epoch(after, "after"), r - 1)
    f: int | None
    if isinstance(sched, Cron):
        f = cron_next(sched.expr, sched.tz, a) if sched.calendar is None else _on_calendar(sched, a, latest=False)
    elif isinstance(sched, Every):
        step = sched.interval.days * 86400 + sched.interval.seconds
        f = r + step if a < r + step else a + step - (a - r) % step
    elif isinstance(sched, Solar):
        f = solar_next(sched.event, sched.lat, sched.lon, a)
    else:
        f = r if isinstance(sched, After) else to_epoch(sched.when, "at")
        if f <= a:
            return None
    return _result(f)


def shared_anchor(schedule: ScheduleValue, registered_at: datetime, until: datetime) -> datetime:
    """An anchor that answers like ``registered_at`` from the latest fire at ``until`` on.

    docs/architecture.md, "The modules, in detail" (core/fires.py, shared_anchor).
    """
    sched = as_schedule(schedule)
    latest = latest_fire(sched, registered_at, until)
    if latest is None:
        return registered_at
    if isinstance(sched, Every):
        return latest - sched.interval
    return latest


def count_fires_before(
    schedule: ScheduleValue, fire: datetime, after: datetime, registered_at: datetime | None, limit: int
) -> int:
    """How many fires ``f`` with ``after < f < fire``, counting no further than ``limit``.

    docs/architecture.md, "The modules, in detail" (core/fires.py, count_fires_before).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidSchedule(f"limit must be a non-negative integer, got {limit!r}")
    sched = as_schedule(schedule)
    end = to_epoch(fire, "fire")
    lo = to_epoch(after, "after")  # f > after  <=>  f > floor(after), for whole seconds f
    r = None if registered_at is None else to_epoch(registered_at, "registered_at")
    if isinstance(sched, Every):
        step = sched.interval.days * 86400 + sched.interval.seconds
        if r is not None:
            lo = max(lo, r)  # an every fires at r + k * step, k >= 1
        return max(0, min(limit, (end - lo - 1) // step))  # the j >= 1 with end - j * step > lo
    if isinstance(sched, At | After):
        if isinstance(sched, After) and r is None:
            return 0  # no anchor: no fire to count
        when = to_epoch(sched.when, "at") if isinstance(sched, At) else r
        assert when is not None
        return 1 if lo < when < end and (r is None or when >= r) and limit else 0
    if isinstance(sched, Solar):
        return _count_solar(sched, lo if r is None else max(lo, r - 1), end, limit)
    spec, key = compile_cron(sched.expr, sched.tz)
    if r is not None:
        lo = max(lo, r - 1)
    n = 0
    if sched.calendar is not None:
        f = _on_calendar(sched, lo, latest=False)
        while f is not None and f < end and n < limit:
            n, f = n + 1, _on_calendar(sched, f, latest=False)
        return n
    try:
        f = _cron_next(spec, key, lo)
        while f is not None and f < end and n < limit:
            n += 1
            f = _cron_next(spec, key, f)
    except (OverflowError, ValueError):  # beyond the datetime range: no further fire
        pass
    return n


def _count_solar(sched: Solar, lo: int, end: int, limit: int) -> int:
    n = 0
    f = solar_next(sched.event, sched.lat, sched.lon, lo)
    while f is not None and f < end and n < limit:
        n += 1
        f = solar_next(sched.event, sched.lat, sched.lon, f)
    return n


def next_fires(schedule: ScheduleValue, registered_at: datetime, after: datetime, n: int) -> list[datetime]:
    """The next ``n`` fires after ``after`` (fewer when the schedule is exhausted)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidSchedule(f"n must be a non-negative integer, got {n!r}")
    out: list[datetime] = []
    cursor = after
    while len(out) < n:
        f = next_fire(schedule, registered_at, cursor)
        if f is None:
            break
        out.append(f)
        cursor = f
    return out


def run_id_of(schedule: ScheduleValue, fire: datetime) -> str:
    """The run id of ``fire`` of ``schedule``: :func:`fire_id` of its NOMINAL instant. A cron on a
    business calendar fires at the rolled instant; its run id stays the nominal one it rolled from."""
    if not isinstance(schedule, Cron) or schedule.calendar is None or schedule.roll == "skip":
        return fire_id(fire)
    days = business_days(schedule.calendar)
    u = to_epoch(fire, "fire")
    return _fire_text(cal_nominal(schedule.expr, schedule.tz, days, str(schedule.roll), u))


def collided_fires(schedule: ScheduleValue, after: datetime, fire: datetime) -> tuple[datetime, ...]:
    """The nominal fires in ``(after, fire]`` of a cron on a business calendar that were skipped
    because they rolled onto a day another fire runs (:func:`.calendar_fires.collided_between`):
    the ``skipped(calendar)`` rows the claim of ``fire`` writes. Empty for every other schedule."""
    if not isinstance(schedule, Cron) or schedule.calendar is None or schedule.roll in (None, "skip"):
        return ()
    days = business_days(schedule.calendar)
    lo, hi = to_epoch(after, "after"), to_epoch(fire, "fire")
    try:
        found = collided_between(schedule.expr, schedule.tz, days, str(schedule.roll), lo, hi)
        return tuple(from_epoch(u) for u in found)
    except (OverflowError, ValueError):
        return ()


def fire_id(instant: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` of ``instant`` in UTC (sub-seconds truncated)."""
    u = to_epoch(instant, "instant")
    try:
        return _fire_text(u)
    except OverflowError as exc:
        raise InvalidSchedule(f"'instant' {instant!r} is out of range") from exc


@lru_cache(maxsize=8192)
def _fire_text(u: int) -> str:
    t = from_epoch(u)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"
