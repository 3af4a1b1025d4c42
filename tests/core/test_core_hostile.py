"""Hostile input: always InvalidSchedule (or a valid schedule), never another exception, never a hang."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alma_schedule.core import At, Cron, Every, latest_fire, next_fire, parse_schedule, preview_fires
from alma_schedule.errors import InvalidSchedule

FAR = datetime(2000, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 6, 1, tzinfo=UTC)
HOSTILE = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

CRON_ALPHABET = st.sampled_from(list("0123456789*/-,LW#?HR@ \tjanmonfriJANSUN7\u0665\u00a0\n"))
CRONISH = st.one_of(st.text(CRON_ALPHABET, max_size=40), st.text(max_size=60))
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _exercise(value: object) -> None:
    try:
        schedule = parse_schedule(value)
    except InvalidSchedule:
        return
    # accepted: it must be usable, bounded and well-formed
    f = next_fire(schedule, FAR, NOW)
    assert f is None or (f > NOW and f.tzinfo is UTC)
    latest = latest_fire(schedule, FAR, NOW)
    assert latest is None or latest <= NOW
    assert parse_schedule(schedule.to_json()) == schedule


@HOSTILE
@given(CRONISH, st.one_of(st.none(), st.text(max_size=30), st.sampled_from(["UTC", "Europe/London"])))
def test_hostile_cron_text(expr: str, tz: str | None) -> None:
    _exercise({"cron": expr, "tz": tz})


@HOSTILE
@given(st.one_of(st.text(max_size=30), st.integers(), st.floats(), st.booleans(), st.none(), JSONISH))
def test_hostile_every(value: object) -> None:
    _exercise({"every": value})


@HOSTILE
@given(st.one_of(st.text(max_size=40), st.integers(), JSONISH))
def test_hostile_at(value: object) -> None:
    _exercise({"at": value})


@HOSTILE
@given(st.one_of(st.text(max_size=80), JSONISH, JSONISH.map(json.dumps)))
def test_hostile_documents(value: object) -> None:
    _exercise(value)


@pytest.mark.parametrize(
    "value",
    [
        "[" * 100_000,
        '{"cron": "' + "1," * 5000 + '1 * * * *"}',
        "9" * 10_000,
        b"\xff\xfe",
        bytearray(b"{}"),
        {"every": "9" * 5000 + "s"},
        {"every": 10**400},
        {"every": float("nan")},
        {"every": float("inf")},
        {"every": "P" + "9" * 30 + "D"},
        {"at": "9999-12-31T23:59:59-12:00"},
        {"at": "0001-01-01T00:00:00+14:00"},
        {"cron": "*/99999999999999999999 * * * *"},
        {"cron": "0 0 * * *", "tz": "../../etc/passwd"},
        {"cron": "0 0 * * *", "tz": "/usr/share/zoneinfo/UTC"},
        {"cron": "0 0 * * *", "tz": "x" * 10_000},
        {"cron": "0 0 * * *", "tz": ""},
        {"cron": "0 0 * * *", "tz": "America"},
        {1: 2},
        {None: "x"},
        {"cron": "0 0 * * *\x00"},
        {"cron": "@every 5m"},
        {"cron": "0 0 1-31/0 * *"},
    ],
)
def test_pathological_inputs(value: object) -> None:
    _exercise(value)


NAIVE = datetime(2026, 1, 1)


@pytest.mark.parametrize("schedule", [Cron("0 * * * *", "Europe/London"), Every(timedelta(minutes=5)), At(NOW)])
@pytest.mark.parametrize("bad", [NAIVE, "2026-01-01T00:00:00Z", 1767225600, None, datetime(2026, 1, 1).date()])
def test_bad_instants_are_refused(schedule: Any, bad: Any) -> None:
    with pytest.raises(InvalidSchedule):
        next_fire(schedule, bad, NOW)
    with pytest.raises(InvalidSchedule):
        next_fire(schedule, FAR, bad)
    with pytest.raises(InvalidSchedule):
        latest_fire(schedule, bad, NOW)
    with pytest.raises(InvalidSchedule):
        latest_fire(schedule, FAR, bad)
    with pytest.raises(InvalidSchedule):
        preview_fires(schedule, FAR, bad, 3)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Cron(5),
        lambda: Cron("* * * * *", 5),
        lambda: Every(5),
        lambda: Every(timedelta(0)),  # type: ignore[arg-type]
        lambda: Every(timedelta(milliseconds=1500)),
        lambda: At(NAIVE),
        lambda: At("2026-01-01"),  # type: ignore[arg-type]
        lambda: At(datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC)),
    ],
)
def test_constructors_validate(make: Any) -> None:
    with pytest.raises(InvalidSchedule):
        make()


@HOSTILE
@given(
    st.datetimes(timezones=st.sampled_from([UTC])),
    st.datetimes(timezones=st.sampled_from([UTC])),
    st.sampled_from(["0 0 1 1 *", "*/5 * * * *", "0 0 29 2 *"]),
    st.sampled_from(["UTC", "Pacific/Kiritimati", "America/Adak"]),
)
def test_any_instant_in_the_datetime_range_is_handled(r: datetime, t: datetime, expr: str, tz: str) -> None:
    cron = Cron(expr, tz)
    f = next_fire(cron, r, t)
    assert f is None or f > t
    g = latest_fire(cron, r, t)
    assert g is None or g <= t
