"""Solar routines through a year of simulated ticks, and the policies that compose with them.

A ``sunset`` in Reykjavik and a ``dawn_civil`` at 78 N are ticked every hour of 2027: each fires once
on every day its event occurs (per ephem, as Celery sets it up), never on a day it does not, each run
id within 60 s of ephem's instant. The policies (jitter, max_runs, bounds, catch_up, backfill,
missed-fire counting, describe) are exercised on solar routines as on any other.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from engine_support import DAY, HOUR, SCOPE, spec

from alma_schedule.core import Solar, fire_id, next_fire
from alma_schedule.errors import RegistrationRefused
from tests.core.solar_reference import next_event

YEAR = datetime(2027, 1, 1, tzinfo=UTC)
PLACES = {
    "reykjavik-sunset": ("sunset", 64.1466, -21.9426),
    "svalbard-dawn": ("dawn_civil", 78.2232, 15.6267),
}


def _fires(sched, routine_id):
    return sorted(r.run_id for r in sched.runs(SCOPE, routine_id=routine_id, limit=1000))


def _instant(run_id: str) -> datetime:
    return datetime.fromisoformat(run_id.replace("Z", "+00:00"))


def _solar_day(instant: datetime, lon: float) -> object:
    """The date on the local mean solar clock (a Reykjavik sunset in June is after midnight UTC)."""
    return (instant + timedelta(hours=lon / 15)).date()


def _ephem_year(event: str, lat: float, lon: float) -> list[float]:
    out: list[float] = []
    cursor = YEAR.timestamp()
    while True:
        u = next_event(event, lat, lon, cursor)
        if u is None or u >= (YEAR + 365 * DAY).timestamp():
            return out
        out.append(u)
        cursor = u + 1


def test_a_year_of_hourly_ticks_fires_once_on_each_day_the_event_occurs(make, clock) -> None:
    clock.set(YEAR)
    sched = make()
    for rid, (event, lat, lon) in PLACES.items():
        sched.register(spec(rid, {"solar": event, "lat": lat, "lon": lon}))
    for hour in range(1, 365 * 24 + 1):
        clock.set(YEAR + hour * HOUR)
        sched.tick()
    for rid, (event, lat, lon) in PLACES.items():
        got = [_instant(f) for f in _fires(sched, rid)]
        reference = [datetime.fromtimestamp(u, UTC) for u in _ephem_year(event, lat, lon)]
        days = [_solar_day(f, lon) for f in got]
        assert len(set(days)) == len(days)  # at most one a day
        assert set(days) == {_solar_day(u, lon) for u in reference}  # and on every day ephem has one
        assert len(got) == len(reference)
        assert max(abs((f - u).total_seconds()) for f, u in zip(got, reference, strict=True)) <= 60
    dawns = {f.date() for f in map(_instant, _fires(sched, "svalbard-dawn"))}
    assert len(dawns) < 365 - 60  # the polar night and the midnight sun leave weeks without one


def test_max_runs_bounds_and_jitter_compose_with_a_solar_routine(make, clock, runner) -> None:
    clock.set(YEAR)
    sched = make()
    schedule = {"solar": "sunset", "lat": 48.8566, "lon": 2.3522, "jitter": "10m", "max_runs": 3}
    sched.register(spec("paris", schedule))
    bounded = {"solar": "sunrise", "lat": 48.8566, "lon": 2.3522, "not_before": "2027-01-03T00:00:00Z"}
    sched.register(spec("late", bounded))
    for hour in range(1, 6 * 24):
        clock.set(YEAR + hour * HOUR)
        sched.tick()
    fires = [_instant(f) for f in _fires(sched, "paris")]
    nominal = [next_fire(Solar("sunset", 48.8566, 2.3522), YEAR, YEAR + d * DAY) for d in range(3)]
    assert fires == nominal  # the run id is the nominal instant; max_runs stopped it after three
    sunrise = Solar("sunrise", 48.8566, 2.3522)
    starts = [next_fire(sunrise, YEAR, datetime(2027, 1, d, tzinfo=UTC)) for d in (3, 4, 5, 6)]
    assert [_instant(f) for f in _fires(sched, "late")] == starts  # none before not_before
    assert all(handle_now >= _instant(key.run_id) for key, handle_now in runner.runs)  # jitter delays, never early


def test_a_missed_solar_fire_is_counted_backfilled_and_catch_up_skips_a_stale_one(make, clock) -> None:
    clock.set(YEAR)
    sched = make()
    dusk_civil = Solar("dusk_civil", 40.7128, -74.006)
    sched.register(spec("dusk", {**dusk_civil.to_json(), "catch_up": "30m"}))
    first = next_fire(dusk_civil, YEAR, YEAR)
    assert first is not None
    clock.set(first + timedelta(minutes=5))
    assert [k.run_id for k in sched.tick().claimed] == [fire_id(first)]
    clock.set(YEAR + 3 * DAY + 12 * HOUR)  # down: the dusks of the 2nd and 3rd collapse into the 3rd's
    assert sched.tick().claimed == ()  # the 3rd's dusk is more than 30 minutes old: skipped, not run late
    assert sched.get(SCOPE, "dusk").fires_missed == 1  # the 2nd's, collapsed
    second = next_fire(dusk_civil, YEAR, first)
    assert second is not None
    receipt = sched.backfill(SCOPE, "dusk", second - HOUR, second + HOUR)
    assert (receipt.fires, receipt.first) == (1, second)
    clock.advance(timedelta(minutes=1))
    assert [k.run_id for k in sched.tick().claimed] == [fire_id(second)]
    dusk = next_fire(dusk_civil, YEAR, clock())
    assert dusk is not None
    clock.set(dusk + timedelta(minutes=5))
    assert [k.run_id for k in sched.tick().claimed] == [fire_id(dusk)]


def test_describe_shows_the_local_time_and_the_days_without_the_event(make, clock) -> None:
    clock.set(datetime(2026, 11, 20, tzinfo=UTC))
    sched = make()
    schedule = {"solar": "sunrise", "lat": 78.2232, "lon": 15.6267, "tz": "Arctic/Longyearbyen"}
    sched.register(spec("svalbard", schedule))
    first = sched.describe(SCOPE, "svalbard", fires=2).next_fires[0]
    assert first.utc > clock() + 60 * DAY and first.zone == "Arctic/Longyearbyen"
    assert first.local.utcoffset() == HOUR
    assert first.note is not None and "days without one" in first.note
    reference = next_event("sunrise", 78.2232, 15.6267, clock().timestamp())
    assert reference is not None and abs(first.utc.timestamp() - reference) <= 60


def test_the_wake_up_hint_is_the_next_solar_fire(make, clock, store) -> None:
    clock.set(datetime(2027, 3, 1, 12, tzinfo=UTC))
    sched = make()
    sched.register(spec("noon", {"solar": "solar_noon", "lat": -33.87, "lon": 151.21}))
    noon = next_fire(Solar("solar_noon", -33.87, 151.21), clock(), clock())
    assert noon is not None and sched.get(SCOPE, "noon").next_due_at == noon
    assert store.peek_wake(clock()) == noon
    clock.set(noon)
    assert [k.run_id for k in sched.tick().claimed] == [fire_id(noon)]
    following = next_fire(Solar("solar_noon", -33.87, 151.21), noon, noon)
    assert following is not None and store.peek_wake(clock()) == following


def test_a_bad_solar_schedule_is_refused_at_registration_and_nothing_is_written(make, clock) -> None:
    clock.set(YEAR)
    sched = make()
    for bad, named in (
        ({"solar": "sunrize", "lat": 64.1, "lon": -21.9}, "did you mean 'sunrise'?"),
        ({"solar": "sunset", "lat": 64.1, "lon": 200}, "'lon' 200 is out of range"),
        ({"solar": "sunset", "lat": 90, "lon": 0}, "'lat' 90 is a pole"),
        ({"solar": "sunset", "lat": 64.1, "lon": -21.9, "tz": "Reykjavik"}, "unknown time zone 'Reykjavik'"),
    ):
        with pytest.raises(RegistrationRefused, match=re.escape(named)):
            sched.register(spec("bad", bad))
    assert sched.routines(SCOPE) == []
