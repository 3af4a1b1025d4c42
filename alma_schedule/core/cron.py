"""The 5-field cron grammar and a wall-clock matcher.

docs/architecture.md, section "The modules, in detail" (core/cron.py).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from datetime import date
from functools import lru_cache

from alma_schedule.errors import InvalidSchedule

EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
SEARCH_YEARS = 410  # > one 400-year Gregorian cycle: a date that exists at all exists in any window
MAX_EXPR_LEN = 200

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {n: i for i, n in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_DAYS = {n: i for i, n in enumerate("sun mon tue wed thu fri sat".split())}
# (name, lowest, highest, names)
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_DIGITS = re.compile(r"[0-9]{1,6}")
_SPLIT = re.compile(r"[ \t]+")
_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_LEN_MASK = tuple((1 << (n + 1)) - 2 for n in range(32))  # bits 1..n


def _show(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


class CronSpec:
    """A parsed cron expression: sorted field sets plus what the DST policy and day rule need."""

    __slots__ = (
        "canonical",
        "day_or",
        "dom_mask",
        "doms",
        "dow_masks",
        "dows",
        "expr",
        "hours",
        "last",
        "minutes",
        "month_set",
        "months",
        "tod",
        "wildcard",
    )

    def __init__(self, expr: str, fields: list[str], sets: list[frozenset[int]], last: bool = False) -> None:
        minutes, hours, doms, months, dows = sets
        self.expr = expr
        #: ``L`` in the day-of-month field: the month's last day matches too
        self.last = last
        self.minutes = tuple(sorted(minutes))
        self.hours = tuple(sorted(hours))
        self.doms = tuple(sorted(doms))
        self.months = tuple(sorted(months))
        self.month_set = frozenset(months)
        self.dows = frozenset(d % 7 for d in dows)
        self.tod = tuple(h * 60 + m for h in self.hours for m in self.minutes)
        # Vixie/cronie: a field "is a star" when its text starts with '*'.
        self.wildcard = fields[0].startswith("*") or fields[1].startswith("*")
        self.day_or = not fields[2].startswith("*") and not fields[4].startswith("*")
        self.dom_mask = sum(1 << d for d in doms)
        self.dow_masks = tuple(
            sum(1 << d for d in range(1, 32) if (first + d - 1) % 7 in self.dows) for first in range(7)
        )
        dow_list = tuple(sorted(self.dows))
        parts: list[tuple[int | str, ...]] = [self.minutes, self.hours, self.doms, self.months, dow_list]
        if last:
            parts[2] = (*self.doms, "L")
        self.canonical = " ".join(
            "*" if text == "*" else ",".join(map(str, vals)) for text, vals in zip(fields, parts, strict=True)
        )


def _value(token: str, field: tuple[str, int, int, dict[str, int]], text: str) -> int:
    name, lo, hi, names = field
    if _DIGITS.fullmatch(token):
        v = int(token)
        if not lo <= v <= hi:
            raise InvalidSchedule(f"{name} field {_show(token)} out of range {lo}-{hi}")
        return v
    low = token.lower()
    if low in names:
        return names[low]
    up = token.upper()
    if up == "L":
        raise InvalidSchedule(f"'L' (the month's last day) is only allowed in the day-of-month field, not {name}")
    if up[:1] in ("L", "W", "H", "R") or re.fullmatch(r"[0-9]+[LW]", up):
        tok = up[:1] if up[:1] in ("L", "W", "H", "R") else up[-1]
        raise InvalidSchedule(f"unsupported token {tok!r} in {name} field {_show(text)} (only standard 5-field cron)")
    if not token:
        raise InvalidSchedule(f"{name} field {_show(text)} has an empty value")
    raise InvalidSchedule(f"{name} field: invalid value {_show(token)} in {_show(text)}")


def _last_day(text: str) -> tuple[str, bool]:
    """The day-of-month field without its ``L`` item (the month's last day), and whether it had one."""
    items = text.split(",")
    last = [i for i in items if i.upper() == "L"]
    if not last:
        return text, False
    if len(last) > 1:
        raise InvalidSchedule(f"day-of-month field {_show(text)} has 'L' more than once")
    rest = [i for i in items if i.upper() != "L"]
    return ",".join(rest), True


def _field_set(text: str, field: tuple[str, int, int, dict[str, int]]) -> frozenset[int]:
    name, lo, hi, _ = field
    if not text and name == "day-of-month":  # only 'L': no numbered day
        return frozenset()
    for tok in ("#", "?"):
        if tok in text:
            raise InvalidSchedule(
                f"unsupported token {tok!r} in {name} field {_show(text)} (only standard 5-field cron)"
            )
    out: set[int] = set()
    for item in text.split(","):
        if not item:
            raise InvalidSchedule(f"{name} field {_show(text)} has an empty list item")
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not _DIGITS.fullmatch(step_text):
                raise InvalidSchedule(f"{name} field step {_show(step_text)} is not a number")
            step = int(step_text)
            if not 1 <= step <= hi - lo + 1:
                raise InvalidSchedule(f"{name} field step {_show(step_text)} out of range 1-{hi - lo + 1}")
        if base == "*":
            start, end = lo, hi
        else:
            a, dash, b = base.partition("-")
            start = _value(a, field, text)
            end = _value(b, field, text) if dash else (hi if slash else start)
            if end < start:
                raise InvalidSchedule(f"{name} field range {_show(base)} is reversed")
        out.update(range(start, end + 1, step))
    return frozenset(out)


@lru_cache(maxsize=4096)
def compile_expr(expr: str) -> CronSpec:
    """Parse ``expr``; raise :class:`InvalidSchedule` naming the field and the reason."""
    if not isinstance(expr, str):
        raise InvalidSchedule(f"cron must be a string, got {type(expr).__name__}")
    if len(expr) > MAX_EXPR_LEN:
        raise InvalidSchedule(f"cron expression too long ({len(expr)} characters, max {MAX_EXPR_LEN})")
    text = expr.strip(" \t")
    if text.startswith("@"):
        alias = ALIASES.get(text.lower())
        if alias is None:
            raise InvalidSchedule(f"unsupported cron alias {_show(text)} (use one of {', '.join(ALIASES)})")
        text = alias
    fields = _SPLIT.split(text) if text else []
    if len(fields) in (6, 7):
        raise InvalidSchedule(
            f"cron {_show(expr)} has {len(fields)} fields: a sixth field {_show(fields[5])} "
            "(seconds or year) is not supported; use the 5 standard fields"
        )
    if len(fields) != 5:
        raise InvalidSchedule(
            f"cron {_show(expr)} needs 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    for f in fields:
        if not f.isascii() or not f.isprintable():
            raise InvalidSchedule(f"cron {_show(expr)} contains a character outside the cron grammar")
    dom_text, last = _last_day(fields[2])
    sets = [_field_set(dom_text if f[0] == "day-of-month" else t, f) for t, f in zip(fields, _FIELDS, strict=True)]
    spec = CronSpec(expr, fields, sets, last)
    if next_date(spec, 2000, 1, 1) is None:
        raise InvalidSchedule(f"cron {_show(expr)} never fires")
    return spec


def _day_mask(spec: CronSpec, y: int, m: int) -> int:
    first = (date(y, m, 1).weekday() + 1) % 7  # 0 = Sunday
    n = _DAYS_IN_MONTH[m]
    if m == 2 and y % 4 == 0 and (y % 100 != 0 or y % 400 == 0):
        n = 29
    dm = spec.dow_masks[first]
    dom = spec.dom_mask | (1 << n) if spec.last else spec.dom_mask
    mask = (dom | dm) if spec.day_or else (dom & dm)
    return mask & _LEN_MASK[n]


def next_date(spec: CronSpec, y: int, m: int, d: int) -> int | None:
    """Ordinal of the first matching date on or after y-m-d (None beyond the search bound)."""
    months = spec.months
    for _ in range(SEARCH_YEARS * 13):
        if m in spec.month_set:
            mask = _day_mask(spec, y, m) >> d
            if mask:
                return date(y, m, d + (mask & -mask).bit_length() - 1).toordinal()
        i = bisect_right(months, m)
        if i < len(months):
            m = months[i]
        else:
            y, m = y + 1, months[0]
            if y > 9999:
                return None
        d = 1
    return None


def prev_date(spec: CronSpec, y: int, m: int, d: int) -> int | None:
    """Ordinal of the last matching date on or before y-m-d (None beyond the search bound)."""
    months = spec.months
    for _ in range(SEARCH_YEARS * 13):
        if m in spec.month_set:
            mask = _day_mask(spec, y, m) & ((2 << d) - 1)
            if mask:
                return date(y, m, mask.bit_length() - 1).toordinal()
        i = bisect_left(months, m) - 1
        if i >= 0:
            m = months[i]
        else:
            y, m = y - 1, months[-1]
            if y < 1:
                return None
        d = 31
    return None


def next_match(spec: CronSpec, w: int) -> int | None:
    """First matching wall minute (wall seconds) at or after wall second ``w``."""
    w = -(-w // 60) * 60
    day, rest = divmod(w, 86400)
    ordinal = day + EPOCH_ORDINAL
    tod = spec.tod
    d = date.fromordinal(ordinal)
    found = next_date(spec, d.year, d.month, d.day)
    if found == ordinal:
        i = bisect_left(tod, rest // 60)
        if i < len(tod):
            return w - rest + tod[i] * 60
        d = date.fromordinal(ordinal + 1)
        found = next_date(spec, d.year, d.month, d.day)
    if found is None:
        return None
    return (found - EPOCH_ORDINAL) * 86400 + tod[0] * 60


def prev_match(spec: CronSpec, w: int) -> int | None:
    """Last matching wall minute (wall seconds) at or before wall second ``w``."""
    w = w // 60 * 60
    day, rest = divmod(w, 86400)
    ordinal = day + EPOCH_ORDINAL
    tod = spec.tod
    d = date.fromordinal(ordinal)
    found = prev_date(spec, d.year, d.month, d.day)
    if found == ordinal:
        i = bisect_right(tod, rest // 60) - 1
        if i >= 0:
            return w - rest + tod[i] * 60
        d = date.fromordinal(ordinal - 1)
        found = prev_date(spec, d.year, d.month, d.day)
    if found is None:
        return None
    return (found - EPOCH_ORDINAL) * 86400 + tod[-1] * 60
