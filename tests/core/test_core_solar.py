"""Solar schedules against the astronomical reference (ephem, as Celery sets it up) and Celery itself.

The sweep in the suite samples days (seeded) but covers every latitude of the grid and every event on
each run; the full ten-year sweep is the ``slow`` test at the end.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from celery.schedules import solar

from alma_schedule.core import Solar, latest_fire, next_fire, parse_schedule, preview_fires, validate_schedule
from alma_schedule.core.fires import count_fires_before
from alma_schedule.core.solar import EVENTS, event_on_day
from alma_schedule.errors import InvalidSchedule
from tests.core.solar_reference import LATITUDES, LONGITUDES, allowed, next_event, touching

SEED = 20260649
START = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
END = datetime(2036, 1, 1, tzinfo=UTC).timestamp()
FAR = datetime(2000, 1, 1, tzinfo=UTC)


def _at(u: float) -> datetime:
    return datetime.fromtimestamp(int(u), UTC)


def _samples(rng: random.Random, per: int) -> list[tuple[str, float, float, float]]:
    """``per`` (event, lat, lon, instant) for every latitude of the grid and every event."""
    return [
        (event, lat, rng.choice(LONGITUDES), rng.uniform(START, END))
        for lat in LATITUDES
        for event in EVENTS
        for _ in range(per)
    ]


def test_the_sampled_sweep_agrees_with_ephem_within_60_s_in_every_band_and_event() -> None:
    misses = []
    for event, lat, lon, u in _samples(random.Random(SEED), 2):
        reference = next_event(event, lat, lon, u)
        fire = next_fire(Solar(event, lat, lon), FAR, _at(u))
        assert reference is not None and fire is not None, (event, lat, lon, u)
        if abs(fire.timestamp() - reference) > allowed(event, lat, lon, reference):
            misses.append((event, lat, lon, _at(u), fire, _at(reference)))
    assert misses == []


def test_the_fires_are_what_celerys_own_solar_schedules() -> None:
    rng = random.Random(SEED + 1)
    misses = []
    for event, lat, lon, u in _samples(rng, 1):
        now = _at(u)
        celery = solar(event, lat, lon, nowfun=lambda now=now: now)
        theirs = now + celery.remaining_estimate(now)
        fire = next_fire(Solar(event, lat, lon), FAR, now)
        assert fire is not None
        if abs((fire - theirs).total_seconds()) > allowed(event, lat, lon, theirs.timestamp()):
            misses.append((event, lat, lon, now, fire, theirs))
    assert misses == []


def test_each_day_has_one_event_or_none_and_latest_and_next_agree() -> None:
    sunset = Solar("sunset", 64.1466, -21.9426)  # Reykjavik
    registered = datetime(2026, 1, 1, tzinfo=UTC)
    fires = [next_fire(sunset, registered, registered)]
    while fires[-1] is not None and fires[-1] < datetime(2026, 2, 1, tzinfo=UTC):
        fires.append(next_fire(sunset, registered, fires[-1]))
    assert all(f is not None for f in fires)
    days = [f.date() for f in fires if f is not None]
    assert len(days) == len(set(days)) == 32  # one a day, from January 1st to February 1st
    for f in fires[1:]:
        assert f is not None
        assert latest_fire(sunset, registered, f) == f
        assert latest_fire(sunset, registered, f - timedelta(seconds=1)) == fires[fires.index(f) - 1]
    assert latest_fire(sunset, fires[3] or registered, fires[2] or registered) is None  # before the anchor


def test_a_polar_night_has_no_sunrise_and_the_next_one_is_weeks_away() -> None:
    sunrise = Solar("sunrise", 78.2232, 15.6267)  # Longyearbyen
    after = datetime(2026, 11, 20, tzinfo=UTC)
    fire = next_fire(sunrise, FAR, after)
    reference = next_event("sunrise", 78.2232, 15.6267, after.timestamp())
    assert fire is not None and reference is not None
    assert fire > after + timedelta(days=60) and abs(fire.timestamp() - reference) <= 60
    first_gap_day = (after - timedelta(days=30)).timestamp() // 86400
    assert any(event_on_day("sunrise", 78.2232, 15.6267, int(first_gap_day) + d) is None for d in range(60))
    assert count_fires_before(sunrise, fire, after, None, 1000) == 0
    (preview,) = preview_fires(Solar("sunrise", 78.2232, 15.6267, "Arctic/Longyearbyen"), FAR, after, 1)
    assert preview.utc == fire and preview.zone == "Arctic/Longyearbyen"
    assert preview.local.utcoffset() == timedelta(hours=1)
    assert preview.note is not None and "days without one" in preview.note and "polar" in preview.note


def test_the_midnight_sun_has_no_sunset_and_solar_noon_fires_every_day() -> None:
    after = datetime(2026, 6, 1, tzinfo=UTC)
    sunset = next_fire(Solar("sunset", 78.2232, 15.6267), FAR, after)
    assert sunset is not None and sunset > datetime(2026, 8, 1, tzinfo=UTC)
    noons = [next_fire(Solar("solar_noon", 78.2232, 15.6267), FAR, after + timedelta(days=d)) for d in range(5)]
    assert len({n.date() for n in noons if n is not None}) == 5


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"solar": "sunrize", "lat": 1, "lon": 2}, "did you mean 'sunrise'?"),
        ({"solar": "noon", "lat": 1, "lon": 2}, "unknown solar event 'noon'"),
        ({"solar": 3, "lat": 1, "lon": 2}, "'solar' must be an event name"),
        ({"solar": "sunset", "lat": 90.5, "lon": 2}, "'lat' 90.5 is out of range"),
        ({"solar": "sunset", "lat": 1, "lon": -180.01}, "'lon' -180.01 is out of range"),
        ({"solar": "sunset", "lat": "48.8", "lon": 2}, "'lat' must be a number"),
        ({"solar": "sunset", "lat": True, "lon": 2}, "'lat' must be a number"),
        ({"solar": "sunset", "lat": float("nan"), "lon": 2}, "'lat' must be a finite number"),
        ({"solar": "sunset", "lat": 1, "lon": float("inf")}, "'lon' must be a finite number"),
        ({"solar": "sunset", "lat": 1}, "needs 'lon'"),
        ({"solar": "sunset", "lat": 1, "lon": 2, "tz": "Europe/Pariss"}, "unknown time zone 'Europe/Pariss'"),
        ({"solar": "sunset", "lat": 1, "lon": 2, "tz": 5}, "'tz' must be a string"),
        ({"solar": "sunset", "lat": 1, "lon": 2, "cron": "* * * * *"}, "more than one of"),
        ({"solar": "sunset", "lat": 1, "lon": 2, "height": 3}, "unknown key 'height' in 'solar' schedule"),
        ({"solar": "sunrise", "lat": -90, "lon": 0}, "'lat' -90 is a pole"),
    ],
)
def test_bad_input_is_refused_naming_the_field(value: object, named: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        validate_schedule(value, now=datetime(2026, 6, 1, tzinfo=UTC))
    assert named in str(info.value)


def test_an_event_that_does_not_occur_within_366_days_is_refused_at_registration() -> None:
    value = {"solar": "sunrise", "lat": 89.99, "lon": 0}
    parse_schedule(value)  # a valid place: only registration (with now) looks ahead
    with pytest.raises(InvalidSchedule, match=r"does not occur at lat 89\.99, lon 0 within 366 days"):
        validate_schedule(value, now=datetime(2026, 6, 1, tzinfo=UTC))
    assert validate_schedule({"solar": "solar_noon", "lat": 90, "lon": 0}, now=datetime(2026, 6, 1, tzinfo=UTC))


def test_the_json_form_round_trips() -> None:
    value = {"solar": "dusk_nautical", "lat": -33.87, "lon": 151.21, "tz": "Australia/Sydney"}
    parsed = parse_schedule(value)
    assert parsed == Solar("dusk_nautical", -33.87, 151.21, "Australia/Sydney")
    assert parsed.to_json() == value and parse_schedule(parsed.to_json()) == parsed
    assert Solar("sunset", 1, 2).to_json() == {"solar": "sunset", "lat": 1, "lon": 2}


@pytest.mark.slow
@pytest.mark.sweep
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("lat", LATITUDES)
def test_the_full_ten_year_sweep_agrees_with_ephem(lat: float) -> None:
    """Every event at every longitude of the grid, every day of 2026-2035, at one latitude (394,000
    events, about 6 minutes on one core: run with ``-m sweep -n auto``). A day only one side has an
    event on must be one where the sun merely touches the altitude (:func:`touching`)."""
    misses: list[object] = []
    touched: list[object] = []
    for lon in LONGITUDES:
        for event in EVENTS:
            cursor = START
            while cursor < END:
                reference = next_event(event, lat, lon, cursor)
                fire = next_fire(Solar(event, lat, lon), FAR, _at(cursor))
                assert reference is not None and fire is not None
                if abs(fire.timestamp() - reference) > allowed(event, lat, lon, reference):
                    one_sided = min(fire.timestamp(), reference)  # the day only one of the two has
                    if not touching(event, lat, lon, one_sided):
                        misses.append((event, lon, _at(cursor), fire, _at(reference)))
                    touched.append((event, lon, _at(one_sided)))
                cursor = max(reference, fire.timestamp()) + 120  # past both answers, whatever their 60 s
    assert misses == []
    assert len(touched) <= 12  # of 394,000: a day the sun meets the altitude within 0.001 degree at its turn
