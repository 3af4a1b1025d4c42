"""parse_schedule / validate_schedule / to_json, the cron grammar and its error messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from alma_schedule.core import At, Cron, Every, fire_id, next_fire, next_fires, parse_schedule, validate_schedule
from alma_schedule.errors import InvalidSchedule

FAR = datetime(2000, 1, 1, tzinfo=UTC)


def fires(expr: str, start: datetime, n: int, tz: str | None = None) -> list[datetime]:
    return next_fires(Cron(expr, tz), FAR, start, n)


# ---------------------------------------------------------------- JSON shapes
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            {"cron": "0 8 * * 1-5", "tz": "Europe/Lisbon"}, Cron("0 8 * * 1-5", "Europe/Lisbon"), id="cron-tz"
        ),
        pytest.param({"cron": "0 8 * * 1-5"}, Cron("0 8 * * 1-5"), id="cron-utc"),
        pytest.param({"cron": "0 8 * * 1-5", "tz": None}, Cron("0 8 * * 1-5"), id="cron-tz-null"),
        pytest.param({"every": "15m"}, Every(timedelta(minutes=15)), id="every-15m"),
        pytest.param({"every": "PT15M"}, Every(timedelta(minutes=15)), id="every-iso"),
        pytest.param({"every": "P1DT2H"}, Every(timedelta(days=1, hours=2)), id="every-iso-days"),
        pytest.param({"every": "1h30m"}, Every(timedelta(minutes=90)), id="every-1h30m"),
        pytest.param({"every": "2s"}, Every(timedelta(seconds=2)), id="every-2s"),
        pytest.param({"every": "1d"}, Every(timedelta(days=1)), id="every-1d"),
        pytest.param({"every": 900}, Every(timedelta(minutes=15)), id="every-int"),
        pytest.param({"every": 900.0}, Every(timedelta(minutes=15)), id="every-whole-float"),
        pytest.param({"at": "2026-12-24T18:00:00+00:00"}, At(datetime(2026, 12, 24, 18, tzinfo=UTC)), id="at-utc"),
        pytest.param({"at": "2026-12-24T18:00:00Z"}, At(datetime(2026, 12, 24, 18, tzinfo=UTC)), id="at-z"),
        pytest.param({"at": "2026-12-24T19:00:00+01:00"}, At(datetime(2026, 12, 24, 18, tzinfo=UTC)), id="at-offset"),
        pytest.param('{"every": "15m"}', Every(timedelta(minutes=15)), id="json-text"),
    ],
)
def test_parse_shapes(value: object, expected: object) -> None:
    got = parse_schedule(value)
    assert got == expected
    assert parse_schedule(got.to_json()) == got
    assert parse_schedule(json.dumps(got.to_json())) == got


def test_to_json_canonical_forms() -> None:
    assert Every(timedelta(minutes=15)).to_json() == {"every": "15m"}
    assert Every(timedelta(seconds=5400)).to_json() == {"every": "1h30m"}
    assert Every(timedelta(days=1, seconds=1)).to_json() == {"every": "1d1s"}
    assert At(datetime(2026, 12, 24, 19, tzinfo=timezone(timedelta(hours=1)))).to_json() == {
        "at": "2026-12-24T18:00:00+00:00"
    }
    assert Cron("0 8 * * 1-5", "Europe/Lisbon").to_json() == {"cron": "0 8 * * 1-5", "tz": "Europe/Lisbon"}
    assert Cron("@daily").to_json() == {"cron": "@daily"}
    assert At(datetime(2026, 1, 1, tzinfo=UTC)).when.tzinfo is UTC


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(
            {"cron": "0 8 * * *", "tz": "Europe/Lisbo"},
            "unknown time zone 'Europe/Lisbo' (did you mean 'Europe/Lisbon'?)",
            id="zone-typo",
        ),
        pytest.param({"cron": "61 * * * *"}, "minute field '61' out of range 0-59", id="minute-range"),
        pytest.param({"cron": "* 24 * * *"}, "hour field '24' out of range 0-23", id="hour-range"),
        pytest.param({"cron": "* * 0 * *"}, "day-of-month field '0' out of range 1-31", id="dom-range"),
        pytest.param({"cron": "* * * 13 *"}, "month field '13' out of range 1-12", id="month-range"),
        pytest.param({"cron": "* * * * 8"}, "day-of-week field '8' out of range 0-7", id="dow-range"),
        pytest.param({"cron": "0 0 30 2 *"}, "cron '0 0 30 2 *' never fires", id="never-feb-30"),
        pytest.param({"cron": "0 0 31 4,6 *"}, "cron '0 0 31 4,6 *' never fires", id="never-31-april-june"),
        pytest.param({"cron": "0 0 31 2 */7"}, "never fires", id="never-and-rule"),
        pytest.param({"every": "0s"}, "interval must be at least 1 second", id="every-zero"),
        pytest.param({"every": -5}, "interval must be at least 1 second", id="every-negative"),
        pytest.param({"every": 0.5}, "interval must be at least 1 second", id="every-subsecond"),
        pytest.param({"every": 1.5}, "not a whole number of seconds", id="every-fraction"),
        pytest.param({"every": "PT0.5S"}, "interval must be at least 1 second", id="every-iso-subsecond"),
        pytest.param({"every": "PT1.5S"}, "not a whole number of seconds", id="every-iso-fraction"),
        pytest.param({"every": "P1M"}, "not a supported ISO 8601 duration", id="every-iso-month"),
        pytest.param({"every": "fortnight"}, "is not an interval", id="every-word"),
        pytest.param({"every": True}, "got a boolean", id="every-bool"),
        pytest.param({"at": "2026-12-24T18:00:00"}, "'at' needs a time zone offset", id="at-naive"),
        pytest.param({"at": "2026-12-24T18:00:00.5+00:00"}, "not a whole second", id="at-subsecond"),
        pytest.param({"at": "tomorrow"}, "is not an ISO 8601 date-time", id="at-garbage"),
        pytest.param({"cron": "* * * * *", "zone": "UTC"}, "unknown key 'zone'", id="unknown-key"),
        pytest.param({"every": "1m", "tz": "UTC"}, "unknown key 'tz'", id="tz-with-every"),
        pytest.param({"colour": "red"}, "unknown key 'colour'", id="only-unknown-key"),
        pytest.param({}, "needs one of 'cron', 'every', 'at', 'solar' or 'after'", id="empty"),
        pytest.param({"cron": "* * * * *", "every": "1m"}, "more than one of", id="two-kinds"),
        pytest.param("[1, 2]", "must be a JSON object", id="json-list"),
        pytest.param("{nope", "not valid JSON", id="bad-json"),
        pytest.param(42, "must be a JSON object", id="number"),
        pytest.param({"cron": 5}, "'cron' must be a string", id="cron-not-string"),
        pytest.param({"cron": "* * * * *", "tz": 5}, "'tz' must be a string", id="tz-not-string"),
    ],
)
def test_refusals_name_the_field(value: object, message: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        parse_schedule(value)
    assert message in str(info.value)
    with pytest.raises(InvalidSchedule):
        validate_schedule(value)


def test_validate_refuses_an_at_before_now() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    assert validate_schedule({"at": "2026-06-01T00:00:00Z"}, now=now) == At(now)
    with pytest.raises(InvalidSchedule, match="earlier than now"):
        validate_schedule({"at": "2026-05-31T23:59:59Z"}, now=now)
    with pytest.raises(InvalidSchedule, match="timezone-aware"):
        validate_schedule({"every": "1m"}, now=datetime(2026, 6, 1))


@pytest.mark.parametrize(
    ("expr", "token"),
    [
        ("0 0 15W * *", "W"),
        ("0 0 * * 5#3", "#"),
        ("0 0 ? * 1", "?"),
        ("H * * * *", "H"),
        ("R * * * *", "R"),
        ("0 0 * * L5", "L"),
        ("0 0 * * 5L", "L"),
        ("0 0 LW * *", "L"),
    ],
)
def test_non_standard_tokens_are_named(expr: str, token: str) -> None:
    with pytest.raises(InvalidSchedule, match=f"unsupported token '{token}'"):
        Cron(expr)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("* * * * * *", "a sixth field '*'"),
        ("0 0 * * * 2026", "a sixth field '2026'"),
        ("* * * *", "needs 5 fields"),
        ("", "needs 5 fields"),
        ("@reboot", "unsupported cron alias '@reboot'"),
        ("0 0 * * 5-1", "range '5-1' is reversed"),
        ("0 0 * dec-feb *", "reversed"),
        ("*/0 * * * *", "step '0' out of range"),
        ("1,,2 * * * *", "empty list item"),
        ("a * * * *", "invalid value 'a'"),
        ("0 0 * * MONDAY", "invalid value"),
        ("\u0665 * * * *", "character"),
        ("0 0 * jan-mon *", "invalid value 'mon'"),
        ("-1 * * * *", "empty value"),
    ],
)
def test_grammar_refusals(expr: str, message: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        Cron(expr)
    assert message in str(info.value)


# ---------------------------------------------------------------- grammar semantics (UTC)
def test_names_are_case_insensitive_and_ranges() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday
    assert fires("0 9 * JAN mon-FRI", start, 3) == fires("0 9 * 1 1-5", start, 3)
    assert [f.weekday() for f in fires("0 9 * * Sat,sun", start, 4)] == [5, 6, 5, 6]


def test_day_of_week_seven_is_sunday() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert fires("0 0 * * 7", start, 3) == fires("0 0 * * 0", start, 3) == fires("0 0 * * sun", start, 3)
    assert [f.weekday() for f in fires("0 0 * * 5-7", start, 3)] == [4, 5, 6]


def test_steps() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert [f.minute for f in fires("*/15 0 * * *", start, 4)] == [15, 30, 45, 0]
    assert [f.minute for f in fires("1-30/5 0 * * *", start, 6)] == [1, 6, 11, 16, 21, 26]
    assert [f.minute for f in fires("5/10 0 * * *", start, 6)] == [5, 15, 25, 35, 45, 55]
    assert [f.minute for f in fires("5-5 0 * * *", start, 2)] == [5, 5]  # an equal range is one value


def test_aliases() -> None:
    start = datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert fires("@yearly", start, 1) == fires("@annually", start, 1) == [datetime(2027, 1, 1, tzinfo=UTC)]
    assert fires("@monthly", start, 1) == [datetime(2026, 2, 1, tzinfo=UTC)]
    assert fires("@weekly", start, 1) == [datetime(2026, 1, 4, tzinfo=UTC)]
    assert fires("@daily", start, 1) == fires("@MIDNIGHT", start, 1) == [datetime(2026, 1, 2, tzinfo=UTC)]
    assert fires("@hourly", start, 1) == [datetime(2026, 1, 1, 1, tzinfo=UTC)]


def test_vixie_day_rule_or_when_both_restricted_and_otherwise() -> None:
    start = datetime(2026, 1, 31, tzinfo=UTC)
    # both restricted: the 13th OR any Friday
    got = fires("0 0 13 * fri", start, 4)
    assert [(f.day, f.weekday()) for f in got] == [(6, 4), (13, 4), (20, 4), (27, 4)]
    got = fires("0 0 1 * mon", datetime(2026, 5, 31, tzinfo=UTC), 3)
    assert [f.day for f in got] == [1, 8, 15]  # June 1 2026 is a Monday
    # a field that starts with '*' makes it AND: odd days that are Mondays
    got = fires("0 0 */2 * mon", start, 3)
    assert all(f.weekday() == 0 and f.day % 2 == 1 for f in got)
    assert fires("0 0 * * mon", start, 1)[0].weekday() == 0
    # Feb 29 exists in leap years
    assert fires("0 0 29 2 *", start, 2) == [datetime(2028, 2, 29, tzinfo=UTC), datetime(2032, 2, 29, tzinfo=UTC)]


def test_rare_and_combination_is_found() -> None:
    # Feb 29 on a Sunday (AND because the day-of-week field starts with '*'): 2032, then 2060
    got = fires("0 0 29 2 */7", datetime(2026, 1, 1, tzinfo=UTC), 2)
    assert got == [datetime(2032, 2, 29, tzinfo=UTC), datetime(2060, 2, 29, tzinfo=UTC)]


def test_end_of_the_datetime_range_is_none_not_an_error() -> None:
    late = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    assert next_fire(Cron("0 0 1 1 *", "Pacific/Chatham"), FAR, late) is None
    assert next_fire(Cron("0 0 1 1 *"), FAR, late) is None


def test_fire_id() -> None:
    assert fire_id(datetime(2026, 3, 8, 7, 0, 0, 999, tzinfo=UTC)) == "2026-03-08T07:00:00Z"
    assert fire_id(datetime(2026, 3, 8, 3, tzinfo=timezone(timedelta(hours=-4)))) == "2026-03-08T07:00:00Z"
    with pytest.raises(InvalidSchedule, match="timezone-aware"):
        fire_id(datetime(2026, 3, 8, 3))
