"""The failure streak and its pause latch, as a pure function."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.model import NON_TERMINAL, REASONS, TERMINAL
from alma_schedule.policies import streak
from alma_schedule.policies.streak import StreakEffect, streak_effect

OUTCOMES = [
    ("failed", "runner_error"),
    ("failed", "config_revision_changed"),
    ("failed", "provider_gone"),
    ("timed_out", None),
    ("completed", "delivered"),
    ("completed", "sent"),
    ("completed", "ok"),
    ("refused", "not_admitted"),
    ("refused", "routing_unavailable"),
    ("refused", "ceiling_reached"),
    ("refused", "cap_exceeded"),
    ("refused", "not_allowed"),
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
        ("failed", "provider_gone", False, False),
        ("refused", "not_admitted", True, False),
        ("refused", "routing_unavailable", True, False),
        ("refused", "ceiling_reached", False, False),
        ("refused", "cap_exceeded", False, False),
        ("refused", "not_allowed", False, False),
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


# ---------------------------------------------------------------------- streak_effect: the table


def _table(state: str, reason: str | None, counts_refused: bool) -> StreakEffect:
    """The streak table of docs/architecture.md, written out independently of the module."""
    if state == "timed_out":
        return StreakEffect.COUNT
    if state == "failed":
        no_verdict = reason in ("config_revision_changed", "provider_gone", "worker_lost")
        return StreakEffect.NONE if no_verdict else StreakEffect.COUNT
    if state == "completed":
        return StreakEffect.NONE if reason == "sent" else StreakEffect.RESET
    if state == "refused" and reason in ("not_admitted", "routing_unavailable"):
        return StreakEffect.COUNT if counts_refused else StreakEffect.NONE
    return StreakEffect.NONE


@pytest.mark.parametrize("counts_refused", [True, False], ids=["counts_refused", "refusals_never_count"])
@pytest.mark.parametrize("state", sorted(TERMINAL | NON_TERMINAL))
def test_streak_effect_is_the_table_for_every_state_and_reason(state: str, counts_refused: bool) -> None:
    for reason in [None, *sorted(REASONS)]:
        got = streak_effect(state, reason, counts_refused=counts_refused)
        assert got is _table(state, reason, counts_refused), (state, reason)
        assert streak.counts(state, reason, counts_refused=counts_refused) == (got is StreakEffect.COUNT)
        assert streak.touches(state, reason, counts_refused=counts_refused) == (got is not StreakEffect.NONE)


def test_streak_effect_defaults_to_counting_refusals_at_start() -> None:
    assert streak_effect("refused", "not_admitted") is StreakEffect.COUNT
    assert streak_effect("refused", "routing_unavailable") is StreakEffect.COUNT
    assert streak_effect("refused", "not_admitted", counts_refused=False) is StreakEffect.NONE
    assert [str(e) for e in StreakEffect] == ["+1", "reset", "none"]


def test_a_routine_at_its_ceiling_never_pauses_itself() -> None:
    refusals = [("refused", r) for r in ("ceiling_reached", "cap_exceeded", "not_allowed")] * 10
    assert streak.fold(refusals, 1) == (0, None)
    assert streak.fold([("failed", "runner_error"), *refusals], 5, streak=3) == (4, None)


def test_refusals_at_start_latch_unless_the_setting_is_off() -> None:
    refusals = [("refused", "not_admitted"), ("refused", "routing_unavailable")]
    assert streak.fold(refusals, 2) == (2, "failure_streak:routing_unavailable")
    assert streak.fold(refusals, 2, counts_refused=False) == (0, None)
    assert streak.step(1, None, "refused", "not_admitted", 2, counts_refused=False) == streak.StreakStep(1, None, False)


def test_a_vanished_target_neither_counts_nor_resets() -> None:
    assert streak.step(3, None, "failed", "provider_gone", 4) == streak.StreakStep(3, None, False)
    assert streak.fold([("failed", "runner_error"), ("failed", "provider_gone")], 5) == (1, None)
