"""The planning back-off, as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.policies import backoff
from alma_schedule.settings import Settings, Timers

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TIMERS = Timers.from_settings(Settings())


def test_retry_doubles_from_defer_first_up_to_defer_max() -> None:
    first, cap = timedelta(minutes=1), timedelta(minutes=10)
    assert [backoff.retry_at(T0, n, first, cap) - T0 for n in range(6)] == [
        timedelta(minutes=m) for m in (1, 2, 4, 8, 10, 10)
    ]
    assert backoff.retry_at(T0, 0, TIMERS.defer_first, TIMERS.defer_max) == T0 + TIMERS.defer_first


@given(st.integers(0, 200))
def test_retry_is_timers_backoff_and_never_past_the_cap(n: int) -> None:
    got = backoff.retry_at(T0, n, TIMERS.defer_first, TIMERS.defer_max)
    assert got == T0 + Timers.backoff(TIMERS.defer_first, TIMERS.defer_max, n)
    assert T0 < got <= T0 + TIMERS.defer_max


def test_a_deferral_records_and_counts() -> None:
    until = T0 + timedelta(hours=1)
    assert backoff.deferred(0, until, "boom") == backoff.PlanningBackoff(until, "boom", 1)
    assert backoff.deferred(4, until, "boom").error_count == 4 + backoff.ERROR_STEP
    assert backoff.first_deferral(0) and not backoff.first_deferral(1)


def test_clear_and_held_back() -> None:
    assert backoff.CLEAR.fields() == {"defer_until": None, "last_error": None, "error_count": 0}
    assert not backoff.held_back(None, T0)
    assert backoff.held_back(T0 + timedelta(seconds=1), T0)
    assert not backoff.held_back(T0, T0), "due again AT defer_until"


def test_next_poll_is_the_deadline_plus_tolerance_when_it_comes_before_the_back_off_step() -> None:
    from alma_schedule.policies.backoff import next_poll

    now = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    step = now + timedelta(minutes=10)
    tol = timedelta(seconds=2)
    assert next_poll(step, now, None, tol) == step  # no deadline
    assert next_poll(step, now, now + timedelta(minutes=3), tol) == now + timedelta(minutes=3, seconds=2)
    assert next_poll(step, now, now + timedelta(hours=1), tol) == step  # far: the back-off
    assert next_poll(step, now, now - timedelta(seconds=5), tol) == step  # already enforceable now
