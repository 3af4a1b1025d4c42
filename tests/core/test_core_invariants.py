"""Invariants of latest_fire / next_fire for cron, every and at; every/at semantics."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alma_schedule.core import At, Cron, Every, ScheduleValue, latest_fire, next_fire, next_fires

ZONES = [
    "UTC",
    "Europe/London",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Antarctica/Troll",
    "Asia/Kolkata",
    "America/Sao_Paulo",
]
CRONS = [
    "*/15 * * * *",
    "30 2 * * *",
    "0 */2 * * *",
    "30 1 * * *",
    "0 9 * * mon-fri",
    "0 0 29 2 *",
    "0 2,3 * * *",
    "45 1 1,15 * *",
    "@hourly",
    "@weekly",
    "0 0 13 * fri",
    "*/20 2 * * *",
    "0 0 */2 * mon",
]

INSTANTS = st.datetimes(min_value=datetime(2017, 1, 1), max_value=datetime(2031, 1, 1), timezones=st.just(UTC))
OFFSETS = st.sampled_from([UTC, timezone(timedelta(hours=-5)), timezone(timedelta(hours=5, minutes=45))])


@st.composite
def schedules(draw: st.DrawFn) -> ScheduleValue:
    kind = draw(st.sampled_from(["cron", "cron", "every", "at"]))
    if kind == "cron":
        return Cron(draw(st.sampled_from(CRONS)), draw(st.sampled_from(ZONES)))
    if kind == "every":
        return Every(timedelta(seconds=draw(st.sampled_from([1, 59, 60, 900, 3600, 5400, 86400, 86401, 604800]))))
    return At(draw(INSTANTS).replace(microsecond=0))


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(schedules(), INSTANTS, INSTANTS, OFFSETS)
def test_invariants(schedule: ScheduleValue, registered: datetime, t: datetime, tz: timezone) -> None:
    registered, t = registered.astimezone(tz), t.astimezone(tz)
    r = registered.replace(microsecond=0)
    latest = latest_fire(schedule, registered, t)
    nxt = next_fire(schedule, registered, t)
    if latest is not None:
        assert r <= latest <= t
        assert latest.tzinfo is UTC and latest.microsecond == 0
        after_latest = next_fire(schedule, registered, latest)
        assert after_latest is None or after_latest > t  # nothing between latest and now
        assert after_latest == nxt
    if nxt is not None:
        assert nxt > t and nxt >= r
        assert nxt.tzinfo is UTC and nxt.microsecond == 0
        assert latest_fire(schedule, registered, nxt) == nxt
        assert latest_fire(schedule, registered, nxt - timedelta(microseconds=1)) == latest
    fires = next_fires(schedule, registered, t, 5)
    assert all(a < b for a, b in itertools.pairwise(fires))
    assert all(f >= r for f in fires)
    assert fires[:1] == ([nxt] if nxt else [])


def test_every_is_anchored_on_registration_k_at_least_one() -> None:
    r = datetime(2026, 1, 1, 10, 0, 0, 700_000, tzinfo=UTC)  # truncated to 10:00:00
    every = Every(timedelta(minutes=15))
    assert next_fire(every, r, r) == datetime(2026, 1, 1, 10, 15, tzinfo=UTC)
    assert next_fire(every, r, r - timedelta(days=1)) == datetime(2026, 1, 1, 10, 15, tzinfo=UTC)
    assert latest_fire(every, r, datetime(2026, 1, 1, 10, 14, 59, tzinfo=UTC)) is None
    assert latest_fire(every, r, datetime(2026, 1, 1, 10, 15, tzinfo=UTC)) == datetime(2026, 1, 1, 10, 15, tzinfo=UTC)
    assert latest_fire(every, r, datetime(2026, 1, 1, 11, 7, tzinfo=UTC)) == datetime(2026, 1, 1, 11, tzinfo=UTC)
    assert next_fire(every, r, datetime(2026, 1, 1, 11, tzinfo=UTC)) == datetime(2026, 1, 1, 11, 15, tzinfo=UTC)


def test_every_ignores_dst() -> None:
    r = datetime(2026, 3, 7, 12, tzinfo=UTC)
    got = next_fires(Every(timedelta(days=1)), r, r, 3)
    assert got == [r + timedelta(days=k) for k in (1, 2, 3)]


def test_at_fires_once_when_not_before_registration() -> None:
    when = datetime(2026, 12, 24, 18, tzinfo=UTC)
    at = At(when)
    r = datetime(2026, 1, 1, tzinfo=UTC)
    assert next_fire(at, r, r) == when
    assert next_fire(at, r, when) is None
    assert latest_fire(at, r, when - timedelta(seconds=1)) is None
    assert latest_fire(at, r, when) == when
    assert latest_fire(at, r, datetime(2030, 1, 1, tzinfo=UTC)) == when
    assert next_fire(at, when, when - timedelta(seconds=5)) == when  # registered exactly at it: counts
    assert next_fire(at, when + timedelta(seconds=1), r) is None  # registered after it: never
    assert latest_fire(at, when + timedelta(seconds=1), datetime(2030, 1, 1, tzinfo=UTC)) is None
    assert next_fires(at, r, r, 3) == [when]


def test_cron_registered_at_bounds() -> None:
    cron = Cron("0 * * * *")
    r = datetime(2026, 1, 1, 10, 0, 0, 500_000, tzinfo=UTC)  # truncated: the 10:00 fire counts
    assert next_fire(cron, r, datetime(2025, 1, 1, tzinfo=UTC)) == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert latest_fire(cron, r, datetime(2026, 1, 1, 10, 30, tzinfo=UTC)) == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert latest_fire(cron, r, datetime(2026, 1, 1, 9, 30, tzinfo=UTC)) is None
    late = datetime(2026, 1, 1, 10, 0, 1, tzinfo=UTC)
    assert latest_fire(cron, late, datetime(2026, 1, 1, 10, 59, tzinfo=UTC)) is None
