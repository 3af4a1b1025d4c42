"""preview_fires: local readings and DST notes for `schedule next`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from alma_schedule.core import At, Cron, Every, FirePreview, preview_fires
from alma_schedule.errors import InvalidSchedule

FAR = datetime(2000, 1, 1, tzinfo=UTC)


def test_spring_forward_shift_and_offset_change_are_noted() -> None:
    got = preview_fires(Cron("30 2 * * *", "America/New_York"), FAR, datetime(2026, 3, 6, tzinfo=UTC), 4)
    assert [p.utc for p in got] == [
        datetime(2026, 3, 6, 7, 30, tzinfo=UTC),
        datetime(2026, 3, 7, 7, 30, tzinfo=UTC),
        datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
        datetime(2026, 3, 9, 6, 30, tzinfo=UTC),
    ]
    assert [p.dst_note for p in got] == [
        None,
        None,
        "DST: offset -05:00 → -04:00; shifted: 02:30 does not exist",
        None,
    ]
    assert got[2].local.strftime("%H:%M%z") == "03:00-0400"
    assert {p.zone for p in got} == {"America/New_York"}
    assert all(p.utc.tzinfo is UTC for p in got)


def test_fall_back_offset_change_is_noted() -> None:
    got = preview_fires(Cron("0 12 * * *", "Europe/London"), FAR, datetime(2026, 10, 24, 13, tzinfo=UTC), 2)
    assert [p.dst_note for p in got] == ["DST: offset +01:00 → +00:00", None]


def test_first_fire_compares_with_the_fire_before_it() -> None:
    got = preview_fires(Cron("0 12 * * *", "Europe/London"), FAR, datetime(2026, 10, 25, 0, tzinfo=UTC), 1)
    assert got[0].dst_note == "DST: offset +01:00 → +00:00"


def test_several_gap_times_collapse_into_one_noted_fire() -> None:
    got = preview_fires(Cron("0,30 2 * * *", "America/New_York"), FAR, datetime(2026, 3, 8, 6, tzinfo=UTC), 1)
    assert got[0].utc == datetime(2026, 3, 8, 7, tzinfo=UTC)
    assert got[0].dst_note == "DST: offset -05:00 → -04:00; shifted: 02:00, 02:30 do not exist"


def test_wildcard_job_has_offset_notes_but_no_shift() -> None:
    got = preview_fires(Cron("0 * * * *", "Europe/London"), FAR, datetime(2026, 3, 29, 0, 30, tzinfo=UTC), 2)
    assert [p.local.strftime("%H:%M%z") for p in got] == ["02:00+0100", "03:00+0100"]
    assert [p.dst_note for p in got] == ["DST: offset +00:00 → +01:00", None]


def test_every_and_at_previews_are_utc() -> None:
    r = datetime(2026, 1, 1, tzinfo=UTC)
    got = preview_fires(Every(timedelta(hours=1)), r, r, 2)
    assert got == [
        FirePreview(r + timedelta(hours=1), r + timedelta(hours=1), "UTC", None),
        FirePreview(r + timedelta(hours=2), r + timedelta(hours=2), "UTC", None),
    ]
    assert preview_fires(At(r + timedelta(days=1)), r, r, 5) == [
        FirePreview(r + timedelta(days=1), r + timedelta(days=1), "UTC", None)
    ]
    assert preview_fires({"every": "1h"}, r, r, 0) == []


@pytest.mark.parametrize("n", [-1, 1.5, True, "3"])
def test_bad_count_is_refused(n: object) -> None:
    with pytest.raises(InvalidSchedule):
        preview_fires(Every(timedelta(hours=1)), FAR, FAR, n)  # type: ignore[arg-type]
