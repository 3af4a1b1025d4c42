"""Contract: the failure streak ``finish`` moves and its auto-pause latch.
docs/architecture.md, section "The modules, in detail" (testing/contract_streak.py).
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alma_schedule.model import REASONS, TERMINAL, RunKey, RunResult
from alma_schedule.policies import streak
from alma_schedule.policies.streak import StreakEffect, streak_effect
from alma_schedule.settings import Timers
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    SCOPE,
    T0,
    TIMERS,
    claim,
    cycle,
    register,
    run_in,
    running,
    with_threshold,
)

#: Property tests drive a real store: few examples, no deadline (PostgreSQL round trips vary), and
#: the per-test ``store`` fixture is shared by the examples (each uses routine ids of its own).
PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
)
_EXAMPLES = itertools.count()

OUTCOMES = [
    RunResult.failed("runner_error"),
    RunResult.failed("config_revision_changed"),
    RunResult.failed("provider_gone"),
    RunResult.timed_out(),
    RunResult.completed("delivered"),
    RunResult.completed("sent"),
    RunResult.refused("not_admitted"),
    RunResult.refused("routing_unavailable"),
    RunResult.refused("ceiling_reached"),
    RunResult.refused("cap_exceeded"),
    RunResult.refused("not_allowed"),
    RunResult("skipped", "missed"),
]

#: Every terminal ``(state, reason)`` a finish may write (a reason-less one too).
EVERY_RESULT = [(state, reason) for state in sorted(TERMINAL) for reason in [None, *sorted(REASONS)]]


def _timers(threshold: int, counts_refused: bool) -> Timers:
    return dataclasses.replace(with_threshold(threshold), streak_counts_refused=counts_refused)


PAUSES = (False, False, False, False, True)  # an operator pause before a finish: rare (it ends the run)


def _finish_manual(
    store: Store,
    routine_id: str,
    i: int,
    result: RunResult,
    *,
    pause: bool,
    threshold: int,
    counts_refused: bool = True,
) -> None:
    """A manual run of ``routine_id`` driven to a state ``result`` may finish from, then finished;
    with ``pause`` the operator pauses the routine just before the finish."""
    now = T0 + i * MINUTE
    key = RunKey.of(SCOPE, routine_id, f"manual:{i:03d}")
    assert store.claim_manual(key, now=now, expires_at=now + HOUR, resend_at=now + MINUTE).won
    if result.outcome != "skipped":
        assert store.start(key, now=now).won
    if result.outcome == "timed_out":
        assert store.submit(key, now=now, batch_id="b", deadline=now, next_poll_at=now + MINUTE).won
    if pause:
        store.set_paused(SCOPE, routine_id, "operator", now=now, next_due_at=None)
    assert store.finish(key, result, now=now, timers=_timers(threshold, counts_refused)).won


class StreakContract:
    # ------------------------------------------------------------------ the failure streak

    @pytest.mark.parametrize(
        ("result", "expected"),
        [
            (RunResult.failed("runner_error"), 3),
            (RunResult.failed("config_revision_changed"), 2),
            (RunResult.completed("delivered"), 0),
            (RunResult.completed("sent"), 2),
            (RunResult.failed("provider_gone"), 2),
            (RunResult.refused("not_admitted"), 3),
            (RunResult.refused("routing_unavailable"), 3),
            (RunResult.refused("ceiling_reached"), 2),
            (RunResult.refused("cap_exceeded"), 2),
            (RunResult.refused("not_allowed"), 2),
        ],
        ids=[
            "failed",
            "config_revision_changed",
            "completed",
            "completed_sent",
            "provider_gone",
            "not_admitted",
            "routing_unavailable",
            "ceiling_reached",
            "cap_exceeded",
            "not_allowed",
        ],
    )
    def test_streak_rules(self, store: Store, result: RunResult, expected: int) -> None:
        register(store)
        for _ in range(2):
            cycle(store, RunResult.failed("runner_error"))
        cycle(store, result)
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.consecutive_failures == expected

    def test_timed_out_counts_and_skipped_does_not(self, store: Store) -> None:
        rec = run_in(store, "submitted")
        store.finish(rec.key, RunResult.timed_out(), now=T0 + HOUR, timers=TIMERS)
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.consecutive_failures == 1
        nxt = claim(store, now=T0 + HOUR)
        store.finish(nxt.key, RunResult("skipped", "missed"), now=T0 + HOUR, timers=TIMERS)
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.consecutive_failures == 1

    def test_manual_runs_count_too(self, store: Store) -> None:
        register(store)
        res = store.claim_manual(
            RunKey.of(SCOPE, "r1", "manual:01"), now=T0, expires_at=T0 + HOUR, resend_at=T0 + MINUTE
        )
        assert res.record is not None
        store.start(res.record.key, now=T0)
        store.finish(res.record.key, RunResult.failed("runner_error"), now=T0, timers=TIMERS)
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.consecutive_failures == 1

    def test_the_streak_latches_a_pause_at_thewith_threshold(self, store: Store) -> None:
        register(store)
        timers = with_threshold(3)
        for n in (1, 2):
            cycle(store, RunResult.failed("provider_error"), timers=timers)
            row = store.get_routine(SCOPE, "r1")
            assert row is not None and row.consecutive_failures == n and row.paused_reason is None
        cycle(store, RunResult.failed("sink_error"), timers=timers)
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.consecutive_failures == 3
        assert row.paused_reason == "failure_streak:sink_error" and row.next_due_at is None
        assert store.peek_due(T0 + 10 * HOUR, 10) == []

    def test_the_latch_keeps_an_earlier_pause_reason(self, store: Store) -> None:
        register(store)
        timers = with_threshold(1)
        rec = running(store)
        store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        store.finish(rec.key, RunResult.failed("runner_error"), now=T0, timers=timers)
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.paused_reason == "operator" and row.consecutive_failures == 1

    def test_threshold_zero_never_latches(self, store: Store) -> None:
        register(store)
        for _ in range(3):
            cycle(store, RunResult.failed("runner_error"), timers=with_threshold(0))
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.paused_reason is None and row.consecutive_failures == 3

    def test_refusals_at_start_count_only_with_the_setting(self, store: Store) -> None:
        register(store)
        on, off = _timers(0, True), _timers(0, False)
        cycle(store, RunResult.refused("not_admitted"), timers=on)
        cycle(store, RunResult.refused("routing_unavailable"), timers=on)
        cycle(store, RunResult.refused("not_admitted"), timers=off)
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.consecutive_failures == 2

    def test_refusals_at_start_latch_a_pause(self, store: Store) -> None:
        register(store)
        cycle(store, RunResult.refused("routing_unavailable"), timers=_timers(1, True))
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.paused_reason == "failure_streak:routing_unavailable"
        assert row.next_due_at is None

    def test_a_routine_at_its_ceiling_never_pauses_itself(self, store: Store) -> None:
        register(store)
        for reason in ("ceiling_reached", "cap_exceeded", "not_allowed") * 2:
            cycle(store, RunResult.refused(reason), timers=_timers(1, True))
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and (row.consecutive_failures, row.paused_reason) == (0, None)

    @pytest.mark.parametrize("counts_refused", [True, False], ids=["counts_refused", "refusals_never_count"])
    def test_every_terminal_result_moves_the_streak_as_streak_effect_says(
        self, store: Store, counts_refused: bool
    ) -> None:
        """Each terminal ``(state, reason)`` in turn, on a streak kept above 0 (a ``failed`` first
        whenever it is 0, so a reset is seen): the store's streak moves by :func:`streak_effect`."""
        routine_id = f"every-{counts_refused}"
        register(store, routine_id)
        results = EVERY_RESULT if counts_refused else [p for p in EVERY_RESULT if p[0] == "refused"]
        current, i = 0, 0
        for state, reason in results:
            if current == 0:
                _finish_manual(store, routine_id, i, RunResult.failed("runner_error"), pause=False, threshold=0)
                current, i = 1, i + 1
            result = RunResult(state, reason)
            _finish_manual(store, routine_id, i, result, pause=False, threshold=0, counts_refused=counts_refused)
            i += 1
            effect = streak_effect(state, reason, counts_refused=counts_refused)
            current = {StreakEffect.COUNT: current + 1, StreakEffect.RESET: 0, StreakEffect.NONE: current}[effect]
            row = store.get_routine(SCOPE, routine_id)
            assert row is not None and row.consecutive_failures == current, (state, reason, effect)

    @PROPERTY
    @given(
        steps=st.lists(st.tuples(st.sampled_from(OUTCOMES), st.sampled_from(PAUSES)), min_size=1, max_size=10),
        threshold=st.sampled_from([0, 2, 3, 5]),
        counts_refused=st.booleans(),
    )
    def test_the_streak_is_the_fold_of_the_policy(
        self, store: Store, steps: list[tuple[RunResult, bool]], threshold: int, counts_refused: bool
    ) -> None:
        """After each finish of a random sequence (some just after an operator pause), the routine's
        streak and pause reason are :func:`streak.fold` of the outcomes so far; a paused routine
        takes no more runs, so the sequence ends at the first pause."""
        routine_id = f"streak-{next(_EXAMPLES)}"
        register(store, routine_id)
        done: list[tuple[str, str | None]] = []
        for i, (result, pause) in enumerate(steps):
            _finish_manual(
                store, routine_id, i, result, pause=pause, threshold=threshold, counts_refused=counts_refused
            )
            done.append((result.outcome, result.reason))
            expected = streak.fold(
                done, threshold, paused_reason="operator" if pause else None, counts_refused=counts_refused
            )
            row = store.get_routine(SCOPE, routine_id)
            assert row is not None and (row.consecutive_failures, row.paused_reason) == expected, done
            if row.paused_reason is not None:
                assert row.next_due_at is None
                break
