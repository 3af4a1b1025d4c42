"""The failure streak and its pause latch, as a pure function."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.policies import streak

OUTCOMES = [
    ("failed", "runner_error"),
    ("failed", "config_revision_changed"),
    ("timed_out", None),
    ("completed", "delivered"),
    ("completed", "sent"),
    ("completed", "ok"),
    ("refused", "not_admitted"),
    ("skipped", "missed"),
]


@pytest.mark.parametrize(
    ("outcome", "reason", "counts", "resets"),
    [
        ("failed", "runner_error", True, False),
        ("failed", "provider_error", True, False),
        ("failed", "config_revision_changed", False, False),
        ("timed_out", None, True, False),
        ("completed", "delivered", False, True),
        ("completed", "ok", False, True),
        ("completed", "sent", False, False),
        ("refused", "not_admitted", False, False),
        ("skipped", "missed", False, False),
    ],
)
def test_which_outcomes_count_and_reset(outcome: str, reason: str | None, counts: bool, resets: bool) -> None:
    assert (streak.counts(outcome, reason), streak.resets(outcome, reason)) == (counts, resets)
    assert streak.touches(outcome, reason) == (counts or resets)


def test_a_count_adds_one_and_latches_at_the_threshold() -> None:
    assert streak.step(0, None, "failed", "runner_error", 3) == streak.StreakStep(1, None, True)
    assert streak.step(2, None, "failed", "sink_error", 3) == streak.StreakStep(3, "failure_streak:sink_error", True)
    assert streak.step(5, None, "timed_out", None, 3) == streak.StreakStep(6, "failure_streak:timed_out", True)


def test_the_first_pause_reason_wins_and_zero_never_latches() -> None:
    assert streak.step(2, "operator", "failed", "runner_error", 1) == streak.StreakStep(3, None, True)
    assert streak.step(99, None, "failed", "runner_error", 0) == streak.StreakStep(100, None, True)


def test_a_reset_writes_only_a_nonzero_streak() -> None:
    assert streak.step(4, None, "completed", "delivered", 5) == streak.StreakStep(0, None, True)
    assert streak.step(0, None, "completed", "delivered", 5) == streak.StreakStep(0, None, False)
    assert streak.step(4, None, "completed", "sent", 5) == streak.StreakStep(4, None, False)


def test_latch_reason() -> None:
    assert streak.latch_reason("failed", "sink_error") == streak.LATCH_PREFIX + "sink_error"
    assert streak.latch_reason("timed_out", None) == "failure_streak:timed_out"


def test_fold_matches_the_contract_examples() -> None:
    two = [("failed", "runner_error")] * 2
    assert streak.fold([*two, ("failed", "runner_error")], 5) == (3, None)
    assert streak.fold([*two, ("failed", "config_revision_changed")], 5) == (2, None)
    assert streak.fold([*two, ("completed", "delivered")], 5) == (0, None)
    assert streak.fold([*two, ("completed", "sent")], 5) == (2, None)
    assert streak.fold([*two, ("failed", "sink_error")], 3) == (3, "failure_streak:sink_error")


@given(st.lists(st.sampled_from(OUTCOMES), max_size=30), st.integers(0, 6))
def test_fold_is_the_run_of_failures_since_the_last_reset(
    results: list[tuple[str, str | None]], threshold: int
) -> None:
    got, paused = streak.fold(results, threshold)
    since = 0
    for outcome, reason in results:
        if streak.resets(outcome, reason):
            since = 0
        elif streak.counts(outcome, reason):
            since += 1
    assert got == since
    if paused is not None:
        assert threshold > 0 and paused.startswith(streak.LATCH_PREFIX)
    # a latch happens exactly when some prefix reached the threshold with a count
    reached = False
    run = 0
    for outcome, reason in results:
        s = streak.step(run, None, outcome, reason, threshold)
        reached = reached or s.latch is not None
        run = s.streak
    assert (paused is not None) == reached


@given(st.integers(0, 50), st.sampled_from(OUTCOMES), st.integers(0, 6), st.sampled_from([None, "operator"]))
def test_a_step_never_goes_negative_nor_unlatches(
    start: int, result: tuple[str, str | None], threshold: int, paused: str | None
) -> None:
    s = streak.step(start, paused, *result, threshold)
    assert s.streak >= 0 and s.streak in (0, start, start + 1)
    assert s.changed == (s.streak != start or s.latch is not None)
    if paused is not None:
        assert s.latch is None
