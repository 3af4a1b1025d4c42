"""beat_schedule -> task routines: every real shape converts exactly, or is refused with its reason.

The exactness check is independent of the converter: Celery's own expanded crontab sets (the
crontab's ``minute``/``hour``/... attributes, ANDed as ``execute_this_date`` does) decide which wall
minutes are due, and the converted routine's fires come from the scheduling core.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery.schedules import crontab, solar

from alma_schedule.beat.convert import (
    ANCHOR_NOTE,
    SOLAR_NOTE,
    AppZone,
    app_zone,
    convert_beat_schedule,
    convert_entry,
)
from alma_schedule.beat.importer import plan_import, system_local_zone
from alma_schedule.core import next_fire, next_fires, parse_schedule
from alma_schedule.model import Scope
from alma_schedule.runners.task import TaskDefinition
from tests.beat import fleet_app

SCOPE = Scope("acme", "ops")
PARIS = AppZone("Europe/Paris", "timezone setting")


def _by_name(app: Any = fleet_app.app, local_zone: str | None = None) -> dict[str, Any]:
    plan = plan_import(app, SCOPE, local_zone=local_zone)
    return {c.name: c for c in plan.conversions}


def celery_fires(c: crontab, zone: str, start: datetime, count: int) -> list[datetime]:
    """Wall minutes after ``start`` where Celery's crontab sets all match (month AND dom AND dow)."""
    tz = ZoneInfo(zone)
    out: list[datetime] = []
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while len(out) < count:
        local = t.astimezone(tz)
        day_ok = (
            local.month in c.month_of_year and local.day in c.day_of_month and local.isoweekday() % 7 in c.day_of_week
        )
        if not day_ok:  # jump to the next local midnight (the windows below avoid DST changes there)
            midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time(), tz)
            t = midnight.astimezone(UTC)
            continue
        if local.hour in c.hour and local.minute in c.minute:
            out.append(t)
        t += timedelta(minutes=1)
    return out


def test_every_entry_of_the_fleet_is_listed_in_order() -> None:
    plan = plan_import(fleet_app.app, SCOPE)
    assert [c.name for c in plan.conversions] == list(fleet_app.BEAT_SCHEDULE)
    assert plan.zone.zone == "Europe/Paris"
    assert {c.name for c in plan.converted} == {
        "reports-weekdays",
        "quarter-close",
        "weekend-sweep",
        "month-start",
        "sync",
        "heartbeat",
        "hourly",
        "lights",
    }


def test_crontab_names_and_steps_convert_as_written() -> None:
    conv = _by_name()["reports-weekdays"]
    assert conv.spec is not None
    assert conv.spec.schedule == {"cron": "*/15 9-17 * * mon-fri", "tz": "Europe/Paris"}
    assert conv.spec.kind == "task" and conv.spec.routine_id == "reports-weekdays"
    assert conv.spec.definition == {"task": "fleet.add", "args": [2, 3]}
    assert conv.converted_as == "cron '*/15 9-17 * * mon-fri' in Europe/Paris"
    quarter = _by_name()["quarter-close"]
    assert quarter.spec is not None
    assert quarter.spec.schedule["cron"] == "30 6 1,15 jan,apr,jul,oct *"
    assert quarter.spec.definition == {"task": "fleet.ping", "kwargs": {"label": "close"}}


def test_celery_only_forms_are_rewritten_to_the_same_values_and_said_so() -> None:
    conv = _by_name()["weekend-sweep"]
    assert conv.spec is not None
    assert conv.spec.schedule["cron"] == "0 */6 * * 0,1,5,6"
    assert any("fri-mon" in n and "0,1,5,6" in n for n in conv.notes)
    full_name = convert_entry(
        "n", {"task": "t", "schedule": crontab(minute=0, hour=9, day_of_week="monday")}, SCOPE, PARIS
    )
    assert full_name.spec is not None and full_name.spec.schedule["cron"] == "0 9 * * 1"


def test_dom_and_dow_both_restricted_is_refused_with_the_and_or_reason() -> None:
    conv = _by_name()["first-monday"]
    assert conv.spec is None
    assert conv.refused is not None
    assert "AND" in conv.refused and "OR" in conv.refused
    assert "'1-7'" in conv.refused and "'monday'" in conv.refused
    # a '*/2' day-of-month is still restricted: refused too (never guessed)
    odd_mondays = crontab(minute=0, hour=7, day_of_month="*/2", day_of_week="mon")
    assert convert_entry("x", {"task": "t", "schedule": odd_mondays}, SCOPE, PARIS).spec is None


def test_one_full_day_field_converts_exactly() -> None:
    conv = _by_name()["month-start"]
    assert conv.spec is not None
    assert conv.spec.schedule["cron"] == "5 0 1-3 * *"
    assert any("day_of_week '0-6' covers every value" in n for n in conv.notes)


@pytest.mark.parametrize(
    ("c", "zone"),
    [
        (crontab(minute="*/15", hour="9-17", day_of_week="mon-fri"), "Europe/Paris"),
        (crontab(minute=30, hour=6, day_of_month="1,15", month_of_year="jan,apr,jul,oct"), "Europe/Paris"),
        (crontab(minute=0, hour="*/6", day_of_week="fri-mon"), "America/New_York"),
        (crontab(minute=5, hour=0, day_of_month="1-3", day_of_week="0-6"), "UTC"),
        (crontab(minute="0-59/20", hour="22-23,0-1", day_of_week="sat,sunday"), "Asia/Tokyo"),
        (crontab(minute={7, 37}, hour=[3, 4, 5], month_of_year="*/4"), "UTC"),
    ],
)
def test_converted_cron_fires_exactly_when_celery_crontab_is_due(c: crontab, zone: str) -> None:
    conv = convert_entry("e", {"task": "t", "schedule": c}, SCOPE, AppZone(zone, "test"))
    assert conv.spec is not None, conv.refused
    ours = parse_schedule(conv.spec.schedule)
    start = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)  # no DST change in the windows compared below
    count = 30
    expected = celery_fires(c, zone, start, count)
    got = next_fires(ours, start, start, count)
    assert got == expected


def test_intervals_convert_to_every_with_the_anchoring_note() -> None:
    by = _by_name()
    sync = by["sync"]
    assert sync.spec is not None
    assert sync.spec.schedule == {"every": "5m"}
    assert sync.spec.definition == {
        "task": "fleet.add",
        "kwargs": {"x": 10, "y": 20},
        "options": {"queue": "fleet.sync", "priority": 5, "expires": 240},
    }
    assert ANCHOR_NOTE in sync.notes and "registration" in ANCHOR_NOTE and "last run" in ANCHOR_NOTE
    heartbeat = by["heartbeat"]
    assert heartbeat.spec is not None and heartbeat.spec.schedule == {"every": "30s"}
    hourly = by["hourly"]
    assert hourly.spec is not None and hourly.spec.schedule == {"every": "1h"}
    assert ANCHOR_NOTE in hourly.notes


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("jitter", ["fractional", "2.5"]),
        ("office", ["custom schedule class", "BusinessHours"]),
        ("routed", ["routing_key", "queue, priority, expires"]),
        ("ghost", ["fleet.nope", "not registered"]),
    ],
)
def test_refusals_name_their_reason(name: str, words: list[str]) -> None:
    conv = _by_name()[name]
    assert conv.spec is None
    assert conv.refused is not None
    for w in words:
        assert w in conv.refused
    assert conv.to_dict()["refused"] == conv.refused


def test_solar_converts_to_the_solar_form_and_fires_when_celery_would() -> None:
    lights = _by_name()["lights"]
    assert lights.spec is not None, lights.refused
    assert lights.spec.schedule == {"solar": "sunset", "lat": 48.8566, "lon": 2.3522}
    assert lights.converted_as == "solar sunset at 48.8566, 2.3522" and SOLAR_NOTE in lights.notes
    after = datetime(2026, 6, 1, 12, tzinfo=UTC)
    fire = next_fire(parse_schedule(lights.spec.schedule), after, after)
    celery = solar("sunset", 48.8566, 2.3522, nowfun=lambda: after)
    assert fire is not None and abs((fire - (after + celery.remaining_estimate(after))).total_seconds()) <= 60


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (solar("sunrise", 90, 0), ["'lat' 90 is a pole", "sunrise"]),
        (solar("sunset", 10, 20, nowfun=lambda: datetime.now(UTC)), ["nowfun"]),
    ],
)
def test_a_solar_entry_we_cannot_keep_is_refused_with_the_reason(value: object, words: list[str]) -> None:
    conv = convert_entry("e", {"task": "t", "schedule": value}, SCOPE, PARIS)
    assert conv.spec is None and conv.refused is not None
    assert all(w in conv.refused for w in words), conv.refused


def test_other_refusals() -> None:
    def refused(entry: dict[str, Any], name: str = "e") -> str:
        conv = convert_entry(name, entry, SCOPE, PARIS)
        assert conv.spec is None
        assert conv.refused is not None
        return conv.refused

    assert "relative" in refused({"task": "t", "schedule": 60, "relative": True})
    assert "control character" in refused({"task": "t", "schedule": 60}, name="bad\x00name")
    assert "JSON" in refused({"task": "t", "schedule": 60, "args": [object()]})
    assert "expires" in refused({"task": "t", "schedule": 60, "options": {"expires": datetime.now(UTC)}})
    assert "one second" in refused({"task": "t", "schedule": 0.5})
    assert "fractional" in refused({"task": "t", "schedule": timedelta(seconds=90, milliseconds=5)})
    assert "no 'schedule'" in refused({"task": "t"})
    assert "no 'task'" in refused({"schedule": 60})
    assert "beat_schedule key" in refused({"task": "t", "schedule": 60, "when": 1})
    assert "nowfun" in refused({"task": "t", "schedule": crontab(minute=0, nowfun=lambda: datetime.now(UTC))})


def test_enable_utc_false_with_a_timezone_reads_crontabs_in_that_timezone() -> None:
    plan = plan_import(fleet_app.local_app, SCOPE, local_zone="Asia/Tokyo")
    assert plan.zone.zone == "America/New_York"
    nightly = {c.name: c for c in plan.conversions}["nightly"]
    assert nightly.spec is not None
    assert nightly.spec.schedule == {"cron": "30 2 * * *", "tz": "America/New_York"}
    every = {c.name: c for c in plan.conversions}["every-10s"]
    assert every.spec is not None and every.spec.schedule == {"every": "10s"}


def test_enable_utc_false_without_timezone_uses_the_system_local_zone_or_refuses() -> None:
    plan = plan_import(fleet_app.naive_app, SCOPE, local_zone="Europe/Lisbon")
    nightly = plan.conversions[0]
    assert nightly.spec is not None and nightly.spec.schedule["tz"] == "Europe/Lisbon"
    assert "system local zone" in plan.zone.source
    unknown = plan_import(fleet_app.naive_app, SCOPE, local_zone=None)
    assert unknown.conversions[0].spec is None
    assert "local time" in (unknown.conversions[0].refused or "")
    # intervals need no zone
    conv = convert_entry("i", {"task": "t", "schedule": 60}, SCOPE, app_zone(None, False, None))
    assert conv.spec is not None


def test_app_zone_follows_celery() -> None:
    assert app_zone(None, True, "Asia/Tokyo").zone == "UTC"
    assert app_zone("Europe/Paris", False, "Asia/Tokyo").zone == "Europe/Paris"
    assert app_zone(ZoneInfo("Europe/Rome"), True, None).zone == "Europe/Rome"
    bad = app_zone("Mars/Olympus", True, None)
    assert bad.zone is None and bad.problem is not None and "Mars/Olympus" in bad.problem


def test_system_local_zone(tmp_path: Any) -> None:
    assert system_local_zone({"TZ": ":Europe/Paris"}) == "Europe/Paris"
    assert system_local_zone({"TZ": "/usr/share/zoneinfo/Asia/Tokyo"}) == "Asia/Tokyo"
    assert system_local_zone({"TZ": "CET-1CEST"}) is None
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "timezone").write_text("America/Chicago\n")
    assert system_local_zone({}, root=str(tmp_path)) == "America/Chicago"
    (etc / "timezone").unlink()
    assert system_local_zone({}, root=str(tmp_path)) is None


def test_converted_definitions_are_valid_task_definitions() -> None:
    for conv in convert_beat_schedule(fleet_app.BEAT_SCHEDULE, SCOPE, PARIS):
        if conv.spec is not None:
            assert TaskDefinition.parse(conv.spec.definition).to_json() == conv.spec.definition
