"""Contract: a fixed-delay routine (``{"after": ...}``) gets its next fire from the end of its run, in
the transaction that writes the end (:mod:`alma_schedule.policies.fixed_delay`); the tick's real
``decide`` (:class:`~alma_schedule.policies.plan.Plan`) claims it.
docs/architecture.md, section "The modules, in detail" (testing/contract_fixed_delay.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.model import RunKey, RunResult, RunState
from alma_schedule.policies.plan import Plan
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import SCOPE, T0, TIMERS, register, with_threshold

SECOND = timedelta(seconds=1)
AFTER = {"after": "5s"}
#: The end of a run, mid-second: the next fire is due at the next whole second plus the delay.
ENDED = T0 + timedelta(seconds=3, milliseconds=250)


def _plan(now: datetime) -> Plan:
    return Plan(now, Settings(), lambda routine: None)


def _claimed(store: Store, now: datetime, routine_id: str = "r1") -> RunKey:
    batch = store.claim_due(now, 100, _plan(now), TIMERS)
    mine = [r for r in batch.claimed if r.routine_id == routine_id]
    assert len(mine) == 1, batch
    return mine[0].key


def _due(store: Store, routine_id: str = "r1") -> datetime | None:
    row = store.get_routine(SCOPE, routine_id)
    assert row is not None
    return row.next_due_at


def _started(store: Store, now: datetime = T0) -> RunKey:
    key = _claimed(store, now)
    assert store.start(key, now=now, owner="w").won
    return key


class FixedDelayContract:
    def test_the_claim_clears_the_index_and_the_end_sets_it_delay_past_the_end(self, store: Store) -> None:
        register(store, schedule=AFTER, next_due_at=T0)
        key = _started(store)
        assert key.run_id == "2026-03-01T12:00:00Z"  # the run id names the instant it came due
        assert _due(store) is None  # in flight: no next fire, so never two runs at once
        assert store.claim_due(T0 + 60 * SECOND, 100, _plan(T0 + 60 * SECOND), TIMERS).claimed == ()
        assert store.finish(key, RunResult.completed("ok"), now=ENDED, timers=TIMERS).won
        assert _due(store) == ENDED.replace(microsecond=0) + SECOND + 5 * SECOND

    def test_a_failed_run_and_a_recorded_one_set_it_too(self, store: Store) -> None:
        register(store, schedule=AFTER, next_due_at=T0)
        key = _started(store)
        assert store.finish(key, RunResult.failed("runner_error"), now=ENDED, timers=TIMERS).won
        nxt = _due(store)
        assert nxt == ENDED.replace(microsecond=0) + 6 * SECOND
        again = _started(store, nxt)
        later = nxt + 40 * SECOND
        assert store.record(again, RunState.FAILED, "operator", now=later).won
        assert _due(store) == later + 5 * SECOND

    def test_a_paused_routine_waits_for_its_resume(self, store: Store) -> None:
        register(store, schedule=AFTER, next_due_at=T0)
        key = _started(store)
        store.set_paused(SCOPE, "r1", "operator", now=T0 + SECOND, next_due_at=None)
        assert store.finish(key, RunResult.completed("ok"), now=ENDED, timers=TIMERS).won
        assert _due(store) is None  # the resume restarts the delay (a fire skipped counts from the skip)

    def test_the_latch_of_the_failure_streak_pauses_before_the_next_fire_is_set(self, store: Store) -> None:
        register(store, schedule=AFTER, next_due_at=T0)
        key = _started(store)
        assert store.finish(key, RunResult.failed("runner_error"), now=ENDED, timers=with_threshold(1)).won
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.paused_reason is not None and row.next_due_at is None

    def test_max_runs_reached_sets_nothing(self, store: Store) -> None:
        register(store, schedule={**AFTER, "max_runs": 1}, next_due_at=T0)
        key = _started(store)
        assert store.finish(key, RunResult.completed("ok"), now=ENDED, timers=TIMERS).won
        assert _due(store) is None

    def test_past_not_after_sets_nothing(self, store: Store) -> None:
        register(store, schedule={**AFTER, "not_after": (T0 + 5 * SECOND).isoformat()}, next_due_at=T0)
        key = _started(store)
        assert store.finish(key, RunResult.completed("ok"), now=ENDED, timers=TIMERS).won
        assert _due(store) is None

    def test_other_schedules_keep_their_own_index(self, store: Store) -> None:
        register(store, schedule={"every": 60}, next_due_at=T0)
        key = _started(store)
        before = _due(store)
        assert store.finish(key, RunResult.completed("ok"), now=ENDED, timers=TIMERS).won
        assert _due(store) == before

    def test_a_manual_run_ending_while_a_fire_is_pending_leaves_it(self, store: Store) -> None:
        register(store, schedule=AFTER, next_due_at=T0 + 600 * SECOND)
        manual = RunKey.of(SCOPE, "r1", "manual:01")
        assert store.claim_manual(manual, now=T0, expires_at=T0 + 600 * SECOND, resend_at=T0).won
        assert store.start(manual, now=T0, owner="w").won
        assert store.finish(manual, RunResult.completed("ok"), now=ENDED, timers=TIMERS).won
        assert _due(store) == T0 + 600 * SECOND
