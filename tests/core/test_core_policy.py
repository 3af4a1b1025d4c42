"""The schedule policies as the core reads them (their semantics are tested where they act)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from alma_schedule.core import Cron, SchedulePolicy, parse_policy, parse_schedule
from alma_schedule.errors import InvalidSchedule


def test_the_policies_sit_beside_the_timing_and_are_not_part_of_it() -> None:
    spec = {"cron": "*/5 * * * *", "overlap": "latest", "catch_up": 600, "jitter": "PT30S", "max_runs": 3}
    assert parse_schedule(spec) == Cron("*/5 * * * *")
    policy = parse_policy(spec)
    assert policy == SchedulePolicy(
        overlap="latest", catch_up=timedelta(minutes=10), jitter=timedelta(seconds=30), max_runs=3
    )
    assert policy.to_json() == {"overlap": "latest", "catch_up": "10m", "jitter": "30s", "max_runs": 3}


def test_no_policy_is_the_default_and_writes_nothing() -> None:
    policy = parse_policy('{"every": "15m"}')
    assert policy.is_default and policy.to_json() == {}
    assert parse_policy({"every": "15m", "overlap": "skip"}).to_json() == {}


def test_bounds_are_normalised_to_utc() -> None:
    policy = parse_policy({"every": "1h", "not_before": "2027-01-01T01:00:00+01:00"})
    assert policy.not_before == datetime(2027, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("extra", "names"),
    [
        ({"overlap": "buffer_one"}, "'overlap'"),
        ({"catch_up": "soon"}, "'catch_up'"),
        ({"jitter": 0}, "'jitter'"),
        ({"max_runs": 0}, "'max_runs'"),
        ({"max_runs": True}, "'max_runs'"),
        ({"max_runs": 2**31}, "'max_runs'"),
        ({"not_before": "2027-01-01T00:00:00"}, "'not_before'"),
        ({"not_after": 5}, "'not_after'"),
        ({"not_before": "2027-02-01T00:00:00+00:00", "not_after": "2027-01-01T00:00:00+00:00"}, "'not_after'"),
    ],
)
def test_a_malformed_policy_is_refused_naming_its_key(extra: dict[str, object], names: str) -> None:
    with pytest.raises(InvalidSchedule, match=names):
        parse_schedule({"every": "1h", **extra})


def test_an_unknown_key_is_still_refused() -> None:
    with pytest.raises(InvalidSchedule, match="unknown key 'overlaps'"):
        parse_schedule({"every": "1h", "overlaps": "latest"})
