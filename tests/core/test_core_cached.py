"""The core's caches answer like the computation they cache, and ``shared_anchor`` keeps its contract.

* ``to_epoch`` / ``from_epoch`` / ``fire_id`` against their one-line definitions, for UTC instants
  (the cached path), other offsets, subclasses and microseconds (the uncached one);
* ``cron_latest`` / ``cron_next`` (cached by expression, zone and epoch second) against the
  uncached segment walk, in zones with DST, around their transitions;
* ``shared_anchor``: from the latest fire at ``until`` on, ``latest_fire`` and ``next_fire`` answer
  the same with it as with the routine's own anchor, for cron, every and at.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alma_schedule.core import At, Cron, Every, ScheduleValue, fire_id, latest_fire, next_fire
from alma_schedule.core.cron_fires import _cron_latest, _cron_next, cron_latest, cron_next
from alma_schedule.core.fires import shared_anchor
from alma_schedule.core.types import compile_cron, from_epoch, to_epoch
from alma_schedule.core.zones import _year_table
from alma_schedule.errors import InvalidSchedule

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Chatham", "America/Santiago"]
CRONS = ["*/15 * * * *", "30 2 * * *", "30 1 * * *", "0 9 * * mon-fri", "0 0 29 2 *", "0 2,3 * * *", "@weekly"]
TRANSITIONS = sorted({b for z in ZONES[1:] for y in (2026, 2027) for b in _year_table(z, y)[0]})
SETTINGS = settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


class Instant(datetime):
    pass


@st.composite
def epochs(draw: st.DrawFn) -> int:
    if draw(st.booleans()):
        return draw(st.sampled_from(TRANSITIONS)) + draw(st.integers(-2 * 86400, 2 * 86400))
    return draw(st.integers(1_735_689_600, 1_830_297_600))


@st.composite
def instants(draw: st.DrawFn) -> datetime:
    t = EPOCH + timedelta(seconds=draw(epochs()), microseconds=draw(st.sampled_from([0, 0, 0, 1, 999_999])))
    kind = draw(st.sampled_from(["utc", "utc", "offset", "subclass"]))
    if kind == "offset":
        return t.astimezone(timezone(timedelta(hours=-7, minutes=-30)))
    if kind == "subclass":
        return Instant.fromtimestamp(t.timestamp(), UTC).replace(microsecond=t.microsecond)
    return t


@st.composite
def schedules(draw: st.DrawFn) -> ScheduleValue:
    kind = draw(st.sampled_from(["cron", "cron", "every", "at"]))
    if kind == "cron":
        return Cron(draw(st.sampled_from(CRONS)), draw(st.sampled_from(ZONES)))
    if kind == "every":
        return Every(timedelta(seconds=draw(st.sampled_from([1, 59, 900, 3600, 5400, 86400, 86401]))))
    return At(EPOCH + timedelta(seconds=draw(epochs())))


@SETTINGS
@given(instants())
def test_instant_conversions_and_fire_ids_match_their_definitions(t: datetime) -> None:
    for _ in range(2):  # cold, then cached
        u = to_epoch(t, "t")
        assert u == (t - EPOCH) // timedelta(seconds=1)
        back = from_epoch(u)
        assert back == datetime.fromtimestamp(u, UTC) and back.tzinfo is UTC and type(back) is datetime
        s = datetime.fromtimestamp(u, UTC)
        assert fire_id(t) == f"{s.year:04d}-{s.month:02d}-{s.day:02d}T{s.hour:02d}:{s.minute:02d}:{s.second:02d}Z"


def test_the_cached_conversions_still_refuse_what_they_refused() -> None:
    with pytest.raises(InvalidSchedule, match="naive"):
        to_epoch(datetime(2026, 1, 1), "now")
    with pytest.raises(InvalidSchedule, match="timezone-aware datetime"):
        to_epoch("2026-01-01", "now")
    with pytest.raises(OverflowError):
        from_epoch(10**12)
    with pytest.raises(InvalidSchedule, match="out of range"):
        fire_id(datetime.max.replace(tzinfo=timezone(timedelta(hours=-14))))


@SETTINGS
@given(st.sampled_from(CRONS), st.sampled_from(ZONES), epochs())
def test_cached_cron_fires_match_the_segment_walk(expr: str, tz: str, u: int) -> None:
    spec, key = compile_cron(expr, tz)
    for _ in range(2):
        assert cron_latest(expr, tz, u) == _cron_latest(spec, key, u)
        assert cron_next(expr, tz, u) == _cron_next(spec, key, u)


@SETTINGS
@given(schedules(), instants(), instants(), st.lists(st.integers(0, 40 * 86400), min_size=1, max_size=4))
def test_the_shared_anchor_answers_like_the_anchor_from_the_latest_fire_on(
    schedule: ScheduleValue, anchor: datetime, until: datetime, later: list[int]
) -> None:
    shared = shared_anchor(schedule, anchor, until)
    latest = latest_fire(schedule, anchor, until)
    if latest is None:
        assert shared is anchor
        return
    assert shared <= latest and shared.tzinfo is UTC
    for t in [latest, until, *(latest + timedelta(seconds=s) for s in later)]:
        assert latest_fire(schedule, shared, t) == latest_fire(schedule, anchor, t)
        assert next_fire(schedule, shared, t) == next_fire(schedule, anchor, t)


def test_routines_registered_apart_share_an_anchor() -> None:
    """Two tenants' ``0 9 * * *`` registered on different days, asked at the same instant."""
    cron, now = Cron("0 9 * * *", "Europe/London"), datetime(2026, 6, 10, 12, 0, tzinfo=UTC)
    a = shared_anchor(cron, datetime(2026, 1, 3, 17, 4, 5, tzinfo=UTC), now)
    b = shared_anchor(cron, datetime(2026, 5, 1, 0, 0, 1, 7, tzinfo=UTC), now)
    assert a == b == datetime(2026, 6, 10, 8, 0, tzinfo=UTC)
    every = Every(timedelta(hours=1))  # the same residue of the hour: one anchor too
    assert shared_anchor(every, datetime(2026, 6, 1, 0, 30, tzinfo=UTC), now) == shared_anchor(
        every, datetime(2026, 6, 9, 3, 30, tzinfo=UTC), now
    )
