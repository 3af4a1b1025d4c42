"""When does a schedule fire: ``latest_fire``, ``next_fire``, ``next_fires`` and ``fire_id``.

Instants are handled as whole epoch seconds (UTC) inside; results are aware UTC datetimes. A cron's
fires are cached by (expression, zone, epoch second) (:func:`cron_latest`, :func:`cron_next`), the
anchor applied outside; :func:`shared_anchor` gives routines that differ only in their anchor one
anchor that answers the same, so the tick's cache of answers is shared (``engine/decide.py``).
A cron is evaluated segment by segment (:func:`~alma_schedule.core.zones.segment_at`: stretches of
constant UTC offset), where wall time is plain arithmetic, and the DST policy (docs/dst-policy.md)
is applied at segment boundaries:

* wildcard job (minute or hour field starts with ``*``): wall minute ``w`` of a segment with offset
  ``off`` fires at ``w - off``. Gap minutes belong to no segment (never fire); fold minutes belong
  to two segments (fire twice).
* fixed-time job: a segment only fires wall minutes at or above the previous segment's last wall
  reading (a repeated wall time fires at its first occurrence only), and a segment that starts
  with a spring-forward gap fires once, at its start, if any wall minute of the gap matches.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

from alma_schedule.core.cron import SEARCH_YEARS, CronSpec, next_match, prev_match
from alma_schedule.core.parse import parse_schedule
from alma_schedule.core.types import At, Cron, Every, ScheduleValue, compile_cron, from_epoch, to_epoch
from alma_schedule.core.zones import segment_at
from alma_schedule.errors import InvalidSchedule

_KINDS = (Cron, Every, At)
_MAX_SEGMENTS = SEARCH_YEARS * 8  # hard bound: a year has 1 pseudo-boundary + a few transitions


def _cron_next(spec: CronSpec, key: str, a: int) -> int | None:
    """First fire strictly after epoch second ``a``."""
    s, e, off, poff = segment_at(key, a)
    fixed = not spec.wildcard
    lo = a + off + 1
    if fixed:
        lo = max(lo, s + poff)
    memo_lo, memo_w = 1, 0  # "the first match at or after memo_lo is memo_w" (empty: lo > w)
    for _ in range(_MAX_SEGMENTS):
        if not memo_lo <= lo <= memo_w:
            found = next_match(spec, lo)
            if found is None:
                return None
            memo_lo, memo_w = lo, found
        w = memo_w
        if w < e + off:
            return w - off
        s, e, off, poff = segment_at(key, e)
        lo = s + off
        if fixed:
            if poff < off:  # spring-forward gap [s + poff, s + off): any match fires once, at s
                g = next_match(spec, s + poff)
                if g is not None and g < s + off:
                    return s
            lo = max(lo, s + poff)
    return None


def _cron_latest(spec: CronSpec, key: str, n: int) -> int | None:
    """Last fire at or before epoch second ``n``."""
    s, e, off, poff = segment_at(key, n)
    fixed = not spec.wildcard
    hi = n + off
    memo_hi, memo_w = 0, 1  # "the last match at or before memo_hi is memo_w" (empty: hi < w)
    for _ in range(_MAX_SEGMENTS):
        lo = max(s + off, s + poff) if fixed else s + off
        if not memo_w <= hi <= memo_hi:
            found = prev_match(spec, hi)
            if found is None:
                return None
            memo_hi, memo_w = hi, found
        w = memo_w
        if w >= lo:
            return w - off
        if fixed and poff < off:
            g = prev_match(spec, s + off - 1)
            if g is not None and g >= s + poff:
                return s
        s, e, off, poff = segment_at(key, s - 1)
        hi = e + off - 1
    return None


# The tick asks the same few questions of every routine that shares a cron (the latest fire at its
# ``now``, the fire after that): the answers are pure functions of (expression, zone, epoch second),
# since a process reads one zone data for its life (``zones.zone_data``, the year tables), so they
# are cached by exactly that. The anchor is applied by the callers, outside the cache.
@lru_cache(maxsize=8192)
def cron_latest(expr: str, tz: str | None, n: int) -> int | None:
    """The last fire of cron ``expr`` in ``tz`` at or before epoch second ``n`` (no anchor), or None
    (none in the search bound, or beyond the datetime range)."""
    spec, key = compile_cron(expr, tz)
    try:
        return _cron_latest(spec, key, n)
    except (OverflowError, ValueError):  # beyond the datetime range (years 1 / 9999)
        return None


@lru_cache(maxsize=8192)
def cron_next(expr: str, tz: str | None, a: int) -> int | None:
    """The first fire of cron ``expr`` in ``tz`` strictly after epoch second ``a`` (no anchor), or None."""
    spec, key = compile_cron(expr, tz)
    try:
        return _cron_next(spec, key, a)
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
        f = cron_latest(sched.expr, sched.tz, n)
    elif isinstance(sched, Every):
        step = sched.interval.days * 86400 + sched.interval.seconds
        if n - r < step:
            return None
        f = n - (n - r) % step
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
        f = cron_next(sched.expr, sched.tz, a)
    elif isinstance(sched, Every):
        step = sched.interval.days * 86400 + sched.interval.seconds
        f = r + step if a < r + step else a + step - (a - r) % step
    else:
        f = to_epoch(sched.when, "at")
        if f <= a:
            return None
    return _result(f)


def shared_anchor(schedule: ScheduleValue, registered_at: datetime, until: datetime) -> datetime:
    """An anchor that answers like ``registered_at`` from the latest fire at ``until`` on.

    With ``L = latest_fire(schedule, registered_at, until)``, the result ``A`` gives
    ``latest_fire(schedule, A, t) == latest_fire(schedule, registered_at, t)`` and the same for
    ``next_fire`` at every ``t`` at or after ``L``: ``L`` itself for a cron or an ``at`` (the anchor
    only drops fires before it), the fire before ``L`` for an ``every`` (the same residue of the
    interval). So routines that share a timing and differ only in when they were registered get one
    anchor, and a cache keyed on it is shared. ``registered_at`` itself when there is no such fire.
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

    ``fire`` is itself a fire of ``schedule`` (an ``every``'s fires are then ``fire - k * interval``:
    arithmetic, whatever the count); ``registered_at``, when given, is the anchor, whose rule applies
    (fires at or after it; an ``every``'s fires strictly after it); None: no anchor (the caller
    knows ``after`` is at or past it). A cron's fires are walked one by one (about 3 us each),
    through the uncached search, so a long count never floods the caches the tick reads."""
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
    if isinstance(sched, At):
        when = to_epoch(sched.when, "at")
        return 1 if lo < when < end and (r is None or when >= r) and limit else 0
    spec, key = compile_cron(sched.expr, sched.tz)
    if r is not None:
        lo = max(lo, r - 1)
    n = 0
    try:
        f = _cron_next(spec, key, lo)
        while f is not None and f < end and n < limit:
            n += 1
            f = _cron_next(spec, key, f)
    except (OverflowError, ValueError):  # beyond the datetime range: no further fire
        pass
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
