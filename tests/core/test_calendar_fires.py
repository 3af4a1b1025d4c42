"""Business calendars in the core: ``L`` (the month's last day) and the roll of a cron's fires off
closed days, checked against the ``holidays`` package (the calendar's source) day by day."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest

from alma_schedule.core import Cron, latest_fire, next_fire, parse_schedule
from alma_schedule.core.calendar import install_calendars
from alma_schedule.errors import InvalidSchedule
from alma_schedule.model.calendar import Calendar

NY = ZoneInfo("America/New_York")
START = datetime(2026, 12, 31, 12, tzinfo=UTC)
END = datetime(2028, 1, 1, 12, tzinfo=UTC)
US = holidays.country_holidays("US", years=[2026, 2027, 2028])


@pytest.fixture(autouse=True)
def us_calendar() -> Iterator[None]:
    cal = Calendar("us", "US", 2026, 2028, tuple((d.isoformat(), n) for d, n in US.items()), version=1)
    install_calendars([cal.business_days()])
    yield
    install_calendars([])


def _business(d: date) -> bool:
    return d.weekday() < 5 and d not in US


def _fires(schedule: object, start: datetime = START, end: datetime = END) -> list[datetime]:
    sched = parse_schedule(schedule)
    out, cursor = [], start
    while (f := next_fire(sched, START - timedelta(days=400), cursor)) is not None and f < end:
        out.append(f)
        cursor = f
    return out


def test_last_business_day_of_each_month_of_2027() -> None:
    fires = _fires({"cron": "0 9 L * *", "tz": "America/New_York", "calendar": "us", "roll": "preceding"})
    expected = []
    for month in range(1, 13):
        d = (date(2027, month, 1) + timedelta(days=32)).replace(day=1) - timedelta(days=1)
        while not _business(d):
            d -= timedelta(days=1)
        expected.append(datetime(d.year, d.month, d.day, 9, tzinfo=NY).astimezone(UTC))
    in_2027 = [f for f in fires if f.astimezone(NY).year == 2027]
    assert in_2027 == expected
    assert date(2027, 4, 30) in [f.astimezone(NY).date() for f in in_2027]  # a Friday, a plain L
    assert date(2027, 7, 30) in [f.astimezone(NY).date() for f in in_2027]  # the 31st is a Saturday
    # the latest fire answers the same sequence backwards
    sched = parse_schedule({"cron": "0 9 L * *", "tz": "America/New_York", "calendar": "us", "roll": "preceding"})
    for f in in_2027:
        assert latest_fire(sched, START - timedelta(days=400), f) == f
        assert latest_fire(sched, START - timedelta(days=400), f + timedelta(days=1)) == f


def test_a_daily_fire_runs_once_on_each_business_day_and_never_twice() -> None:
    for roll in ("skip", "following", "preceding"):
        fires = _fires({"cron": "0 9 * * *", "tz": "America/New_York", "calendar": "us", "roll": roll})
        days = [f.astimezone(NY).date() for f in fires if f.astimezone(NY).year == 2027]
        assert len(days) == len(set(days))
        assert days == [d for d in (date(2027, 1, 1) + timedelta(n) for n in range(365)) if _business(d)]


def test_a_fire_on_a_closed_day_rolls_to_the_next_business_day() -> None:
    fires = _fires({"cron": "0 9 * * 6", "tz": "America/New_York", "calendar": "us", "roll": "following"})
    days = [f.astimezone(NY) for f in fires if f.astimezone(NY).year == 2027]
    assert all(_business(d.date()) and d.hour == 9 for d in days)
    assert date(2027, 1, 19) in [d.date() for d in days]  # Sat 16 Jan -> Tue 19 (MLK day on the 18th)
    assert len(days) == 52  # every Saturday of 2027 once


def test_skip_drops_the_fires_of_closed_days() -> None:
    fires = _fires({"cron": "0 9 25 12 *", "tz": "America/New_York", "calendar": "us", "roll": "skip"})
    assert fires == []  # Christmas is always a holiday


def test_bad_calendar_input_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidSchedule, match="'roll' must be one of"):
        parse_schedule({"cron": "0 9 * * *", "calendar": "us", "roll": "nearest"})
    with pytest.raises(InvalidSchedule, match="'roll' needs a 'calendar'"):
        parse_schedule({"cron": "0 9 * * *", "roll": "following"})
    with pytest.raises(InvalidSchedule, match="'calendar' must be a calendar name"):
        parse_schedule({"cron": "0 9 * * *", "calendar": "US NY"})
    with pytest.raises(InvalidSchedule, match=r"'calendar' 'su' is not a known calendar \(did you mean 'us'\?\)"):
        next_fire(Cron("0 9 * * *", None, "su", "skip"), START, START)
    for expr in ("0 L * * *", "L 9 * * *", "0 9 * L *", "0 9 * * L"):
        with pytest.raises(InvalidSchedule, match="only allowed in the day-of-month field"):
            parse_schedule({"cron": expr})


def test_l_alone_is_the_last_day_of_every_month() -> None:
    fires = _fires({"cron": "0 0 L * *"}, datetime(2028, 1, 1, tzinfo=UTC), datetime(2029, 1, 1, tzinfo=UTC))
    assert [f.day for f in fires] == [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    assert parse_schedule({"cron": "0 0 1,L * *"}).to_json() == {"cron": "0 0 1,L * *"}
    assert parse_schedule({"cron": "0 9 L * *", "calendar": "us"}).to_json() == {
        "cron": "0 9 L * *",
        "calendar": "us",
        "roll": "skip",
    }
