"""The deadline rules: a tracked message's ``expires`` and when a submitted run is ``timed_out``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alma_schedule.policies.deadline import message_expires, timed_out
from alma_schedule.runners.task_tracking import send_expires

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DEADLINE = NOW + timedelta(hours=2)
TOLERANCE = timedelta(seconds=2)


def test_the_message_expires_at_the_deadline_or_at_options_expires_when_earlier() -> None:
    two_hours = timedelta(hours=2)
    assert message_expires(two_hours, None) == 7200
    assert message_expires(two_hours, 600) == 600
    assert message_expires(two_hours, 3 * 3600) == 7200  # a later options.expires never extends it
    assert send_expires({"expires": 60.5, "queue": "q"}, two_hours) == 60.5
    assert send_expires({}, two_hours) == 7200
    assert send_expires({"expires": 60}, None) is None  # untracked: options.expires as given


def test_timed_out_only_from_the_deadline_plus_the_tolerance_on() -> None:
    assert not timed_out(None, NOW + timedelta(days=999), TOLERANCE)
    assert not timed_out(DEADLINE, DEADLINE, TOLERANCE)
    assert not timed_out(DEADLINE, DEADLINE + TOLERANCE - timedelta(microseconds=1), TOLERANCE)
    assert timed_out(DEADLINE, DEADLINE + TOLERANCE, TOLERANCE)  # when its poll is due
    assert timed_out(DEADLINE, DEADLINE, timedelta(0))
