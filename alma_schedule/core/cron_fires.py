"""The fires of a cron in its zone, on epoch seconds: ``cron_next`` and ``cron_latest`` (cached by
expression, zone and second), below :mod:`.fires` and :mod:`.calendar_fires`, which both read them.

docs/architecture.md, section "The modules, in detail" (core/cron_fires.py).
"""

from __future__ import annotations

from functools import lru_cache

from alma_schedule.core.cron import SEARCH_YEARS, CronSpec, next_match, prev_match
from alma_schedule.core.types import compile_cron
from alma_schedule.core.zones import segment_at

__all__ = ["cron_latest", "cron_next"]

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
