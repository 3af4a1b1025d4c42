"""Property test: latest_fire / next_fire against a brute-force oracle written here.

The oracle walks real time minute by minute in UTC, reads the wall clock with zoneinfo, matches the
fields with its own tiny parser and applies the Vixie/cronie DST policy literally:

* wildcard job (minute or hour text starts with '*'): fire at every UTC minute whose wall reading
  matches;
* fixed-time job: fire at a UTC minute whose wall reading is NEW (greater than every reading seen
  so far) and matches, or whose wall reading jumped forward over at least one matching wall minute
  (spring-forward gap: one fire at the first instant after the gap).

It imports neither croniter nor the matcher's internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alma_schedule.core import Cron, latest_fire, next_fire
from alma_schedule.errors import InvalidSchedule

MINUTE = timedelta(minutes=1)
PRE = timedelta(hours=6)  # history the fixed-time rule needs before the window
HALF = timedelta(hours=48)  # the oracle window is anchor ± HALF
PROBE = 30 * 60  # probes lie within anchor ± 30 h (minutes)

ZONES = (
    "Europe/London",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kolkata",
    "America/Sao_Paulo",
    "Europe/Dublin",
    "Antarctica/Troll",
    "UTC",
)


# ---------------------------------------------------------------- the oracle's own cron reading
def _num(tok: str, names: dict[str, int]) -> int:
    return names[tok.lower()] if tok.lower() in names else int(tok)


def oracle_field(text: str, lo: int, hi: int, names: dict[str, int] | None = None) -> set[int]:
    names = names or {}
    out: set[int] = set()
    for item in text.split(","):
        base, _, step = item.partition("/")
        if base == "*":
            a, b = lo, hi
        elif "-" in base:
            x, y = base.split("-")
            a, b = _num(x, names), _num(y, names)
        else:
            a = _num(base, names)
            b = hi if step else a
        out.update(range(a, b + 1, int(step or 1)))
    return out


@dataclass(frozen=True)
class OracleCron:
    minutes: frozenset[int]
    hours: frozenset[int]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]
    wildcard: bool
    day_or: bool

    @classmethod
    def parse(cls, expr: str) -> OracleCron:
        f = expr.split()
        return cls(
            frozenset(oracle_field(f[0], 0, 59)),
            frozenset(oracle_field(f[1], 0, 23)),
            frozenset(oracle_field(f[2], 1, 31)),
            frozenset(oracle_field(f[3], 1, 12)),
            frozenset(d % 7 for d in oracle_field(f[4], 0, 7)),
            f[0].startswith("*") or f[1].startswith("*"),
            not f[2].startswith("*") and not f[4].startswith("*"),
        )

    def matches(self, wall: datetime) -> bool:
        if wall.minute not in self.minutes or wall.hour not in self.hours or wall.month not in self.months:
            return False
        dom_ok = wall.day in self.doms
        dow_ok = (wall.weekday() + 1) % 7 in self.dows
        return (dom_ok or dow_ok) if self.day_or else (dom_ok and dow_ok)


@lru_cache(maxsize=256)
def wall_walk(zone: str, start: datetime, end: datetime) -> tuple[datetime, ...]:
    """The naive wall reading of every UTC minute start, start + 1 min, ..., end."""
    tz = ZoneInfo(zone)
    n = (end - start) // MINUTE + 1
    return tuple((start + i * MINUTE).astimezone(tz).replace(tzinfo=None) for i in range(n))


def oracle_fires(expr: str, zone: str, lo: datetime, hi: datetime) -> list[datetime]:
    """Every fire in [lo, hi] (lo, hi whole UTC minutes), walking from lo - PRE."""
    cron = OracleCron.parse(expr)
    fires = []
    seen: datetime | None = None
    first = lo - PRE
    skip = PRE // MINUTE
    for i, wall in enumerate(wall_walk(zone, first, hi)):
        if cron.wildcard:
            fire = cron.matches(wall)
        elif seen is None or wall <= seen:  # first step, or a repeated (fold) reading
            fire = False
        else:
            fire = cron.matches(wall)
            skipped = seen + MINUTE
            while not fire and skipped < wall:  # readings jumped over (gap)
                fire = cron.matches(skipped)
                skipped += MINUTE
        if seen is None or wall > seen:
            seen = wall
        if fire and i >= skip:
            fires.append(first + i * MINUTE)
    return fires


# ---------------------------------------------------------------- anchors: real transitions
@cache
def transitions(zone: str, first_year: int, last_year: int) -> tuple[datetime, ...]:
    tz = ZoneInfo(zone)
    out = []
    t = datetime(first_year, 1, 1, tzinfo=UTC)
    end = datetime(last_year + 1, 1, 1, tzinfo=UTC)
    step = timedelta(hours=3)
    prev = t.astimezone(tz).utcoffset()
    while t < end:
        nxt = t + step
        off = nxt.astimezone(tz).utcoffset()
        if off != prev:
            lo, hi = t, nxt  # offset(lo) == prev != offset(hi): bisect to the minute
            while hi - lo > MINUTE:
                mid = lo + (hi - lo) // 2
                mid = mid.replace(second=0)
                if mid.astimezone(tz).utcoffset() == prev:
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
            prev = off
        t = nxt
    return tuple(out)


@cache
def anchors(zone: str) -> tuple[datetime, ...]:
    found = transitions(zone, 2024, 2030)
    if zone == "America/Sao_Paulo":
        found = transitions(zone, 2017, 2019) + found
    if not found:  # no DST: probe at London's instants and a few ordinary days
        found = transitions("Europe/London", 2024, 2030)
    return (*found, datetime(2026, 1, 15, tzinfo=UTC), datetime(2028, 2, 29, 12, tzinfo=UTC))


def test_anchor_transitions_are_found() -> None:
    assert datetime(2026, 3, 8, 7, tzinfo=UTC) in transitions("America/New_York", 2026, 2026)
    assert datetime(2025, 10, 4, 15, 30, tzinfo=UTC) in transitions("Australia/Lord_Howe", 2025, 2025)
    assert len(transitions("Asia/Kolkata", 2024, 2030)) == 0
    assert len(transitions("America/Sao_Paulo", 2024, 2030)) == 0
    assert len(transitions("America/Sao_Paulo", 2017, 2019)) == 5


def _around(expr: str, zone: str, t: datetime) -> list[datetime]:
    return oracle_fires(expr, zone, t - timedelta(hours=3), t + timedelta(hours=3))


def test_oracle_reproduces_research_golden_rows() -> None:
    t = datetime(2025, 3, 9, 7, tzinfo=UTC)
    assert _around("0 */2 * * *", "America/New_York", t) == [
        datetime(2025, 3, 9, 5, tzinfo=UTC),
        datetime(2025, 3, 9, 8, tzinfo=UTC),
        datetime(2025, 3, 9, 10, tzinfo=UTC),
    ]
    assert _around("0,30 2 * * *", "America/New_York", t) == [t]
    t = datetime(2025, 10, 26, 1, tzinfo=UTC)
    assert _around("0 2,3 * * *", "Antarctica/Troll", t) == [
        datetime(2025, 10, 26, 0, tzinfo=UTC),
        datetime(2025, 10, 26, 3, tzinfo=UTC),
    ]


# ---------------------------------------------------------------- expression strategies
def _values(lo: int, hi: int, hot: list[int]) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(hot), st.integers(lo, hi))


def _field(lo: int, hi: int, hot: list[int], steps: list[int], star: float) -> st.SearchStrategy[str]:
    v = _values(lo, hi, hot)
    rng = st.tuples(v, v).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(rng, st.sampled_from(steps)).map(lambda p: f"{p[0]}/{p[1]}")
    start_step = st.tuples(v, st.sampled_from(steps)).map(lambda p: f"{p[0]}/{p[1]}")
    lst = st.lists(st.one_of(v.map(str), rng), min_size=2, max_size=3).map(",".join)
    star_step = st.sampled_from(steps).map(lambda s: f"*/{s}")
    other = st.one_of(v.map(str), rng, stepped, start_step, lst, star_step)
    pct = int(star * 100)
    return st.sampled_from(range(100)).flatmap(lambda i: st.just("*") if i < pct else other)


@cache
def expressions(hot_hours: tuple[int, ...], hot_minutes: tuple[int, ...]) -> st.SearchStrategy[str]:
    """Cron text from structured parts; hour and minute values biased to the transition's wall clock."""
    return st.tuples(
        _field(0, 59, [0, 15, 30, 45, 59, *hot_minutes], [1, 2, 5, 7, 10, 15, 20, 30], 0.2),
        _field(0, 23, [0, 23, *hot_hours], [1, 2, 3, 5, 12], 0.25),
        _field(1, 31, [1, 5, 26, 30, 31], [2, 3, 7], 0.75),
        _field(1, 12, [2, 3, 4, 9, 10, 11], [2, 3], 0.8),
        _field(0, 7, [0, 6, 7], [2, 3], 0.75),
    ).map(" ".join)


@st.composite
def cases(draw: st.DrawFn, targeted: bool = False) -> tuple[str, str, datetime, datetime, datetime]:
    zone = draw(st.sampled_from(ZONES))
    anchor = draw(st.sampled_from(anchors(zone)))
    tz = ZoneInfo(zone)
    before, after = (anchor - MINUTE).astimezone(tz), anchor.astimezone(tz)
    hot_hours = tuple(sorted({before.hour, after.hour, (before.hour + 1) % 24, (after.hour + 23) % 24}))
    hot_minutes = tuple(sorted({before.minute, after.minute, (before.minute + 1) % 60}))
    if targeted:  # wall times inside/around the gap or fold, mostly fixed-time jobs, every day
        minute = draw(st.sampled_from(["30", "0", "45", "0,30", "15,45", "*/20", "59", "*/30", "1-5"]))
        hour = draw(st.sampled_from([str(h) for h in hot_hours] + ["*/2", ",".join(map(str, hot_hours))]))
        day = draw(st.sampled_from(["* * *", "* * *", "* * 0", "26,27,28 * *", "*/2 * *"]))
        expr = f"{minute} {hour} {day}"
        window = draw(st.sampled_from([150, 150, 600]))
    else:
        expr = draw(expressions(hot_hours, hot_minutes))
        window = draw(st.sampled_from([180, PROBE, 600]))
    minutes = draw(st.integers(-window, window))
    second = draw(st.sampled_from([0, 0, 0, 30, 59]))
    micro = draw(st.sampled_from([0, 0, 0, 1, 999_999]))
    probe = anchor + timedelta(minutes=minutes, seconds=second, microseconds=micro)
    kind = draw(st.sampled_from(["far", "before", "far", "after"]))
    if kind == "far":
        registered = datetime(2000, 1, 1, tzinfo=UTC)
    else:
        delta = timedelta(seconds=draw(st.integers(0, 30 * 3600)))
        registered = probe - delta if kind == "before" else probe + delta
    return expr, zone, anchor, probe, registered


def _floor_minute(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


def check_against_oracle(case: tuple[str, str, datetime, datetime, datetime]) -> None:
    expr, zone, anchor, probe, registered = case
    lo, hi = anchor - HALF, anchor + HALF
    fires = oracle_fires(expr, zone, lo, hi)
    r = registered.replace(microsecond=0)
    try:
        schedule = Cron(expr, zone)
    except InvalidSchedule:  # e.g. '* * 30/2 2 *' never fires: the oracle agrees over its window
        assert fires == []
        return
    note = f"{expr!r} {zone} probe={probe.isoformat()} registered={registered.isoformat()}"

    got_next = next_fire(schedule, registered, probe)
    want = [f for f in fires if f > probe and f >= r]
    if want:
        assert got_next == want[0], note
    else:
        assert got_next is None or got_next > hi, note

    got_latest = latest_fire(schedule, registered, probe)
    want = [f for f in fires if f <= probe and f >= r]
    if want:
        assert got_latest == want[-1], note
    elif r >= lo:
        assert got_latest is None, note
    else:
        assert got_latest is None or r <= got_latest < lo, note
    for got in (got_next, got_latest):
        assert got is None or (got.tzinfo is UTC and got.microsecond == 0)


@settings(max_examples=2000, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(cases())
def test_latest_and_next_match_the_oracle(case: tuple[str, str, datetime, datetime, datetime]) -> None:
    check_against_oracle(case)


@settings(max_examples=1000, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(cases(targeted=True))
def test_transition_wall_times_match_the_oracle(case: tuple[str, str, datetime, datetime, datetime]) -> None:
    check_against_oracle(case)


# ---------------------------------------------------------------- deterministic grid around transitions
GRID_EXPRS = (
    "30 2 * * *",
    "0 * * * *",
    "*/15 * * * *",
    "0 0 * * *",
    "0 1 * * 0",
    "30 1 * * *",
    "45 1 * * *",
    "15 2 * * *",
    "0,30 2 * * *",
    "*/20 2 * * *",
    "0 */2 * * *",
    "0 3 * * *",
    "15 3 * * *",
    "30 23 * * *",
    "0 23 * * *",
    "30 0 * * *",
    "59 1 * * *",
    "0 2,3 * * *",
    "0 0-23/2 * * *",
    "45 2 * * *",
    "1-5 1,2 * * *",
    "*/7 1-3 * * *",
)


def _grid_anchors() -> list[tuple[str, datetime]]:
    out = [(z, t) for z in ZONES[:4] + ZONES[6:8] for t in transitions(z, 2025, 2025)]
    out += [("America/Sao_Paulo", t) for t in transitions("America/Sao_Paulo", 2018, 2018)]
    out.append(("Asia/Kolkata", datetime(2025, 3, 30, 1, tzinfo=UTC)))
    out.append(("UTC", datetime(2025, 10, 26, 1, tzinfo=UTC)))
    return out


@pytest.mark.parametrize(
    ("zone", "anchor"),
    [pytest.param(z, t, id=f"{z.split('/')[-1].lower()}-{t:%Y-%m-%dT%H%M}") for z, t in _grid_anchors()],
)
def test_grid_around_transition_matches_the_oracle(zone: str, anchor: datetime) -> None:
    far = datetime(2000, 1, 1, tzinfo=UTC)
    lo, hi = anchor - timedelta(hours=30), anchor + timedelta(hours=30)
    for expr in GRID_EXPRS:
        w_lo, w_hi = lo - timedelta(hours=18), hi + timedelta(hours=18)
        fires = oracle_fires(expr, zone, w_lo, w_hi)
        cron = Cron(expr, zone)
        probes = [anchor + timedelta(minutes=m) for m in range(-480, 481, 7)]
        probes += [anchor + timedelta(minutes=m) for m in range(-1800, 1801, 53)]
        near = [f for f in fires if abs(f - anchor) <= timedelta(hours=8)]
        probes += [f + timedelta(seconds=d) for f in near for d in (-1, 0, 1)]
        for p in probes:
            want_next = next((f for f in fires if f > p), None)
            want_latest = next((f for f in reversed(fires) if f <= p), None)
            got_next, got_latest = next_fire(cron, far, p), latest_fire(cron, far, p)
            if want_next is not None:
                assert got_next == want_next, f"next {expr!r} {zone} {p}"
            else:
                assert got_next is not None and got_next > w_hi
            if want_latest is not None:
                assert got_latest == want_latest, f"latest {expr!r} {zone} {p}"
            else:
                assert got_latest is not None and got_latest < w_lo
        for f in near:  # registered exactly at a fire: it counts
            assert next_fire(cron, f, f - timedelta(seconds=1)) == f
            assert latest_fire(cron, f, f) == f
            assert latest_fire(cron, f + timedelta(seconds=1), f + timedelta(hours=1)) in (
                None,
                *[g for g in fires if f < g <= f + timedelta(hours=1)][-1:],
            )
