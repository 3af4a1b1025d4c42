"""core.bounds: fires inside not_before / not_after (inclusive), anchored as the timing says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from alma_schedule.core import (
    At,
    Cron,
    Every,
    SchedulePolicy,
    bounded_latest_fire,
    bounded_next_fire,
    bounded_next_fires,
    preview_fires,
)
from alma_schedule.errors import InvalidSchedule

R = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
H = timedelta(hours=1)
HOURLY = Every(H)


def test_no_bounds_is_the_plain_schedule() -> None:
    assert bounded_next_fire(HOURLY, R, R) == R + H
    assert bounded_latest_fire(HOURLY, R, R + 2 * H + timedelta(minutes=5)) == R + 2 * H


def test_not_before_is_inclusive_and_keeps_the_anchor() -> None:
    on_a_fire = SchedulePolicy(not_before=R + 3 * H)
    assert bounded_next_fire(HOURLY, R, R, on_a_fire) == R + 3 * H
    between = SchedulePolicy(not_before=R + 3 * H + timedelta(minutes=20))
    assert bounded_next_fire(HOURLY, R, R, between) == R + 4 * H, "every stays on registered_at + k x interval"
    assert bounded_latest_fire(HOURLY, R, R + 3 * H + timedelta(minutes=30), between) is None


def test_a_sub_second_not_before_excludes_the_whole_second_before_it() -> None:
    policy = SchedulePolicy(not_before=R + 3 * H + timedelta(microseconds=1))
    assert bounded_next_fire(HOURLY, R, R, policy) == R + 4 * H
    assert bounded_latest_fire(HOURLY, R, R + 3 * H + timedelta(minutes=1), policy) is None


def test_not_after_is_inclusive_and_ends_the_schedule() -> None:
    policy = SchedulePolicy(not_after=R + 2 * H)
    assert bounded_next_fires(HOURLY, R, R, 10, policy) == [R + H, R + 2 * H]
    assert bounded_next_fire(HOURLY, R, R + 2 * H, policy) is None
    assert bounded_latest_fire(HOURLY, R, R + 10 * H, policy) == R + 2 * H, "the last fire in the bounds"


def test_bounds_on_cron_and_at() -> None:
    cron = Cron("0 9 * * *", "Europe/Lisbon")
    policy = SchedulePolicy(not_before=datetime(2026, 3, 5, tzinfo=UTC), not_after=datetime(2026, 3, 7, 9, tzinfo=UTC))
    assert bounded_next_fires(cron, R, R, 10, policy) == [datetime(2026, 3, d, 9, tzinfo=UTC) for d in (5, 6, 7)]
    once = At(R + 5 * H)
    assert bounded_next_fire(once, R, R, SchedulePolicy(not_after=R + 4 * H)) is None
    assert bounded_next_fire(once, R, R, SchedulePolicy(not_before=R + 5 * H)) == R + 5 * H


def test_preview_fires_respects_the_bounds() -> None:
    policy = SchedulePolicy(not_before=R + 2 * H, not_after=R + 4 * H)
    assert [p.utc for p in preview_fires(HOURLY, R, R, 10, policy=policy)] == [R + 2 * H, R + 3 * H, R + 4 * H]


def test_a_bad_count_is_refused() -> None:
    with pytest.raises(InvalidSchedule):
        bounded_next_fires(HOURLY, R, R, -1)
