"""Business calendars through the Scheduler on simulated time, on every backend: a ``0 9 L * *``
routine on a US calendar (holidays from the ``holidays`` package) fires on the last business day of
each month of 2027 and on no other day; an unknown calendar is refused at registration; ``describe``
names the rolled fire's holiday; the tick report warns of a calendar that runs out within a year."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest
from engine_support import SCOPE, every_store, spec

from alma_schedule.core.calendar import install_calendars
from alma_schedule.engine.calendars import resolve_calendar
from alma_schedule.errors import RegistrationRefused
from alma_schedule.model import RunState

NY = ZoneInfo("America/New_York")
EOM = {"cron": "0 9 L * *", "tz": "America/New_York", "calendar": "us", "roll": "preceding"}
START = datetime(2026, 12, 31, 20, tzinfo=UTC)  # after December 2026's last business day


@pytest.fixture(autouse=True)
def _forget_installed() -> object:
    yield
    install_calendars([])


def _last_business_days(year: int) -> list[date]:
    closed = holidays.country_holidays("US", years=year)
    out = []
    for month in range(1, 13):
        d = (date(year, month, 28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
        while d.weekday() >= 5 or d in closed:
            d -= timedelta(days=1)
        out.append(d)
    return out


@every_store
def test_last_business_day_of_each_month_of_2027_and_no_other_day(make, clock, store) -> None:
    store.put_calendar(resolve_calendar("us", country="US", first_year=2026, years=3), now=START)
    clock.set(START)
    sched = make()
    sched.register(spec("eom", EOM))
    for _ in range(40):  # the clock follows the wake-up hints: one tick per fire and a few more
        wake = sched.tick().next_wake_at
        if wake is None or wake >= datetime(2028, 1, 1, tzinfo=UTC):
            break
        clock.set(wake)
    runs = sorted(store.list_runs(SCOPE, routine_id="eom", limit=100), key=lambda r: r.fire_at)
    assert all(r.state == RunState.COMPLETED for r in runs)
    days = [r.fire_at.astimezone(NY) for r in runs]
    assert [d.date() for d in days] == _last_business_days(2027)
    assert {(d.hour, d.minute) for d in days} == {(9, 0)}
    assert date(2027, 12, 30) in [d.date() for d in days]  # the 31st: New Year's Day (observed)
    by_id = {r.run_id: r.fire_at.astimezone(NY).date() for r in runs}
    assert by_id["2027-07-31T13:00:00Z"] == date(2027, 7, 30)  # the run id stays the nominal instant
    assert by_id["2027-04-30T13:00:00Z"] == date(2027, 4, 30)


def test_an_unknown_calendar_is_refused_with_the_closest_name(make, clock, store) -> None:
    store.put_calendar(resolve_calendar("us-ny", country="US", subdiv="NY", first_year=2026, years=2), now=START)
    clock.set(START)
    with pytest.raises(
        RegistrationRefused, match=r"'calendar' 'us-nj' is not a known calendar \(did you mean 'us-ny'\?\)"
    ):
        make().register(spec("eom", {**EOM, "calendar": "us-nj"}))
    assert store.get_routine(SCOPE, "eom") is None


def test_describe_names_the_holiday_a_fire_rolled_off(make, clock, store) -> None:
    store.put_calendar(resolve_calendar("us", country="US", first_year=2027, years=1), now=START)
    clock.set(datetime(2027, 5, 1, tzinfo=UTC))
    sched = make()
    sched.register(spec("eom", EOM))
    install_calendars([])  # describe reads them itself
    view = sched.describe(SCOPE, "eom")
    first = view.next_fires[0]
    assert first.local.date() == date(2027, 5, 28) and "rolled from Mon 2027-05-31 (Memorial Day)" in (first.note or "")


def test_the_tick_report_warns_a_year_before_a_calendar_runs_out(make, clock, store) -> None:
    store.put_calendar(resolve_calendar("us", country="US", first_year=2027, years=1), now=START)
    clock.set(datetime(2027, 3, 1, tzinfo=UTC))
    sched = make()
    sched.register(spec("daily", {"cron": "0 9 * * *", "tz": "America/New_York", "calendar": "us"}))
    clock.set(datetime(2027, 3, 1, 15, tzinfo=UTC))
    report = sched.tick()
    assert report.warnings == ("calendar 'us' runs out on 2027-12-31: `alma-schedule calendars refresh us`",)
    assert report.to_dict()["warnings"] == list(report.warnings)


@every_store
@pytest.mark.parametrize("roll", ["following", "preceding"])
def test_a_fire_rolled_onto_a_day_with_a_fire_of_its_own_is_recorded_skipped_calendar(make, clock, store, roll) -> None:
    """A daily 09:00 New York cron: the fires of Sat 3, Sun 4 and Mon 5 July 2027 (Independence Day,
    observed) roll onto a business day that has its own 09:00 fire, so each is recorded
    ``skipped(calendar)`` under its nominal instant's run id, once; every business day runs once."""
    store.put_calendar(resolve_calendar("us", country="US", first_year=2027, years=1), now=START)
    clock.set(datetime(2027, 7, 1, 12, tzinfo=UTC))
    sched = make()
    sched.register(spec("daily", {"cron": "0 9 * * *", "tz": "America/New_York", "calendar": "us", "roll": roll}))
    end = datetime(2027, 7, 9, 12, tzinfo=UTC)
    for _ in range(40):  # the clock follows the wake-up hints, each tick twice (a repeat adds no row)
        sched.tick()
        wake = sched.tick().next_wake_at
        if wake is None or wake >= end:
            break
        clock.set(wake)
    runs = store.list_runs(SCOPE, routine_id="daily", limit=100)
    ran = sorted(r.fire_at.astimezone(NY).date() for r in runs if r.state == RunState.COMPLETED)
    assert ran == [date(2027, 7, d) for d in (1, 2, 6, 7, 8)]
    skipped = sorted((r.run_id, r.state, r.reason, r.fire_at) for r in runs if r.state != RunState.COMPLETED)
    nominal = [datetime(2027, 7, d, 13, tzinfo=UTC) for d in (3, 4, 5)]
    assert skipped == [(f"2027-07-0{f.day}T13:00:00Z", RunState.SKIPPED, "calendar", f) for f in nominal]
    assert len({r.run_id for r in runs}) == len(runs) == 8
