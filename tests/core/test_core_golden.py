"""Golden DST cases: literal dates, readable ids, Vixie/cronie policy (docs/dst-policy.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from alma_schedule.core import Cron, latest_fire, next_fire, next_fires

FAR = datetime(2000, 1, 1, tzinfo=UTC)


def Z(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def fires_between(cron: Cron, start: datetime, end: datetime) -> list[datetime]:
    return [f for f in next_fires(cron, FAR, start - timedelta(seconds=1), 100) if f <= end]


def local(fires: list[datetime], zone: str) -> list[str]:
    return [f.astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M%z") for f in fires]


GOLDEN = [
    # zone, expr, window start, window end (UTC), expected fires (UTC)
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        Z(2026, 3, 28, 12),
        Z(2026, 3, 30, 12),
        [Z(2026, 3, 29, 1, 0), Z(2026, 3, 30, 0, 30)],
        id="london-spring-0130-shifted",
    ),
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        Z(2026, 10, 24, 12),
        Z(2026, 10, 26, 12),
        [Z(2026, 10, 25, 0, 30), Z(2026, 10, 26, 1, 30)],
        id="london-fall-0130-first-occurrence",
    ),
    pytest.param(
        "America/New_York",
        "30 2 * * *",
        Z(2026, 3, 7, 12),
        Z(2026, 3, 9, 12),
        [Z(2026, 3, 8, 7, 0), Z(2026, 3, 9, 6, 30)],
        id="newyork-spring-0230-shifted-to-0300edt",
    ),
    pytest.param(
        "America/New_York",
        "30 2 * * *",
        Z(2026, 10, 31, 12),
        Z(2026, 11, 2, 12),
        [Z(2026, 11, 1, 7, 30), Z(2026, 11, 2, 7, 30)],
        id="newyork-fall-0230-est-once",
    ),
    pytest.param(
        "America/New_York",
        "0,30 2 * * *",
        Z(2026, 3, 8, 4),
        Z(2026, 3, 8, 10),
        [Z(2026, 3, 8, 7, 0)],
        id="newyork-spring-two-gap-times-collapse",
    ),
    pytest.param(
        "America/New_York",
        "30 1 * * *",
        Z(2026, 11, 1, 3),
        Z(2026, 11, 1, 9),
        [Z(2026, 11, 1, 5, 30)],
        id="newyork-fall-0130-first-occurrence",
    ),
    pytest.param(
        "America/New_York",
        "0 1-5 * * *",
        Z(2026, 3, 8, 5),
        Z(2026, 3, 8, 10),
        [Z(2026, 3, 8, 6), Z(2026, 3, 8, 7), Z(2026, 3, 8, 8), Z(2026, 3, 8, 9)],
        id="newyork-spring-fixed-range-0200-shifted-onto-0300",
    ),
    pytest.param(
        "Europe/London",
        "*/30 * * * *",
        Z(2026, 3, 29, 0),
        Z(2026, 3, 29, 2),
        [Z(2026, 3, 29, 0), Z(2026, 3, 29, 0, 30), Z(2026, 3, 29, 1), Z(2026, 3, 29, 1, 30), Z(2026, 3, 29, 2)],
        id="london-spring-wildcard-gap-skipped",
    ),
    pytest.param(
        "Europe/London",
        "*/30 * * * *",
        Z(2026, 10, 25, 0),
        Z(2026, 10, 25, 2),
        [Z(2026, 10, 25, 0), Z(2026, 10, 25, 0, 30), Z(2026, 10, 25, 1), Z(2026, 10, 25, 1, 30), Z(2026, 10, 25, 2)],
        id="london-fall-wildcard-repeat-twice",
    ),
    pytest.param(
        "America/New_York",
        "0 */2 * * *",
        Z(2026, 3, 8, 4),
        Z(2026, 3, 8, 10),
        [Z(2026, 3, 8, 5), Z(2026, 3, 8, 8), Z(2026, 3, 8, 10)],
        id="newyork-spring-hour-step-wildcard-gap",
    ),
    pytest.param(
        "America/New_York",
        "0 */2 * * *",
        Z(2026, 11, 1, 3),
        Z(2026, 11, 1, 9),
        [Z(2026, 11, 1, 4), Z(2026, 11, 1, 7), Z(2026, 11, 1, 9)],
        id="newyork-fall-hour-step-wildcard",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "45 1 * * *",
        Z(2026, 4, 4, 12),
        Z(2026, 4, 5, 18),
        [Z(2026, 4, 4, 14, 45), Z(2026, 4, 5, 15, 15)],
        id="lordhowe-fall-30min-first-occurrence",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "15 2 * * *",
        Z(2026, 10, 3, 12),
        Z(2026, 10, 4, 18),
        [Z(2026, 10, 3, 15, 30), Z(2026, 10, 4, 15, 15)],
        id="lordhowe-spring-0215-shifted-to-0230",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "0 */2 * * *",
        Z(2026, 10, 3, 13),
        Z(2026, 10, 3, 18),
        [Z(2026, 10, 3, 13, 30), Z(2026, 10, 3, 17)],
        id="lordhowe-spring-hour-step-wildcard-gap",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "0 * * * *",
        Z(2026, 4, 4, 13),
        Z(2026, 4, 4, 17),
        [Z(2026, 4, 4, 13), Z(2026, 4, 4, 14), Z(2026, 4, 4, 15, 30), Z(2026, 4, 4, 16, 30)],
        id="lordhowe-fall-hourly-wildcard",
    ),
    pytest.param(
        "Pacific/Chatham",
        "0 3 * * *",
        Z(2026, 4, 4, 10),
        Z(2026, 4, 5, 18),
        [Z(2026, 4, 4, 13, 15), Z(2026, 4, 5, 14, 15)],
        id="chatham-fall-0300-first-occurrence-1345",
    ),
    pytest.param(
        "Pacific/Chatham",
        "15 3 * * *",
        Z(2026, 9, 26, 10),
        Z(2026, 9, 27, 18),
        [Z(2026, 9, 26, 14, 0), Z(2026, 9, 27, 13, 30)],
        id="chatham-spring-0315-shifted-to-0345",
    ),
    pytest.param(
        "Pacific/Chatham",
        "0 * * * *",
        Z(2026, 4, 4, 11),
        Z(2026, 4, 4, 16),
        [
            Z(2026, 4, 4, 11, 15),
            Z(2026, 4, 4, 12, 15),
            Z(2026, 4, 4, 13, 15),
            Z(2026, 4, 4, 14, 15),
            Z(2026, 4, 4, 15, 15),
        ],
        id="chatham-fall-hourly-at-quarter-past-utc",
    ),
    pytest.param(
        "Asia/Kolkata",
        "30 2 * * *",
        Z(2026, 3, 7, 0),
        Z(2026, 3, 9, 0),
        [Z(2026, 3, 7, 21), Z(2026, 3, 8, 21)],
        id="kolkata-no-dst",
    ),
    pytest.param(
        "America/Sao_Paulo",
        "0 0 * * *",
        Z(2018, 11, 3, 12),
        Z(2018, 11, 4, 12),
        [Z(2018, 11, 4, 3)],
        id="saopaulo-2018-midnight-gap-to-0100",
    ),
    pytest.param(
        "America/Sao_Paulo",
        "30 23 * * *",
        Z(2018, 2, 17, 12),
        Z(2018, 2, 18, 12),
        [Z(2018, 2, 18, 1, 30)],
        id="saopaulo-2018-fall-2330-once",
    ),
    pytest.param(
        "Antarctica/Troll",
        "0 2,3 * * *",
        Z(2026, 3, 28, 22),
        Z(2026, 3, 29, 4),
        [Z(2026, 3, 29, 1)],
        id="troll-spring-2h-gap-collapses",
    ),
    pytest.param(
        "Antarctica/Troll",
        "0 2,3 * * *",
        Z(2026, 10, 24, 22),
        Z(2026, 10, 25, 4),
        [Z(2026, 10, 25, 0), Z(2026, 10, 25, 3)],
        id="troll-fall-2h-fold",
    ),
]


@pytest.mark.parametrize(("zone", "expr", "start", "end", "expected"), GOLDEN)
def test_golden(zone: str, expr: str, start: datetime, end: datetime, expected: list[datetime]) -> None:
    cron = Cron(expr, zone)
    got = fires_between(cron, start, end)
    assert got == expected, local(got, zone)
    for f in expected:  # both directions agree on every golden fire
        assert latest_fire(cron, FAR, f) == f
        assert latest_fire(cron, FAR, f + timedelta(seconds=59)) == f
        assert next_fire(cron, FAR, f - timedelta(seconds=1)) == f


def test_local_readings_of_the_new_york_fall_wildcard() -> None:
    got = fires_between(Cron("30 * * * *", "America/New_York"), Z(2026, 11, 1, 3), Z(2026, 11, 1, 8))
    assert local(got, "America/New_York") == [
        "10-31 23:30-0400",
        "11-01 00:30-0400",
        "11-01 01:30-0400",
        "11-01 01:30-0500",
        "11-01 02:30-0500",
    ]


def test_hourly_alias_is_a_wildcard_job() -> None:
    got = fires_between(Cron("@hourly", "Europe/London"), Z(2026, 10, 25, 0), Z(2026, 10, 25, 2))
    assert local(got, "Europe/London") == ["10-25 01:00+0100", "10-25 01:00+0000", "10-25 02:00+0000"]
    assert Cron("@hourly").wildcard and not Cron("@daily").wildcard


def test_daily_alias_is_fixed_time() -> None:
    got = fires_between(Cron("@daily", "America/Sao_Paulo"), Z(2018, 11, 3, 12), Z(2018, 11, 5, 12))
    assert got == [Z(2018, 11, 4, 3), Z(2018, 11, 5, 2)]


def test_latest_in_the_second_pass_of_a_fold_is_the_first_pass() -> None:
    cron = Cron("30 1 * * *", "Europe/London")
    # 01:45 GMT (second pass) on 2026-10-25: the 01:30 fire happened at 00:30Z, not 01:30Z
    assert latest_fire(cron, FAR, Z(2026, 10, 25, 1, 45)) == Z(2026, 10, 25, 0, 30)
    assert next_fire(cron, FAR, Z(2026, 10, 25, 1, 0)) == Z(2026, 10, 26, 1, 30)


def test_results_are_aware_utc_whole_seconds() -> None:
    f = next_fire(Cron("30 2 * * *", "America/New_York"), FAR, datetime(2026, 3, 8, 1, 0, 0, 123, tzinfo=UTC))
    assert f == Z(2026, 3, 8, 7) and f.tzinfo is UTC
    tokyo = Z(2026, 3, 8, 7).astimezone(ZoneInfo("Asia/Tokyo"))
    f = latest_fire(Cron("30 2 * * *", "America/New_York"), FAR, tokyo)
    assert f == Z(2026, 3, 8, 7) and f is not None and f.tzinfo is UTC
