"""The engine finishes a run only from the state its caller owns, and never finishes an uncertain one.

* Two collectors, driven step by step through their two handles (no threads, no timing): collector B
  has read ``submitted``; collector A wins ``submitted -> collecting`` and delivers; then B's poll
  says the job is gone (or B sees a changed revision, or B's runner raises). B's ``finish`` must
  lose: the ledger says what A did, and the streak is untouched.
* A runner that raises ``OutcomeUncertain`` (the provider accepted, recording failed) leaves the run
  ``running`` with its reservation held; nothing re-runs it; the operator's ``record`` settles it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from engine_support import HOUR, MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.engine import Scheduler
from alma_schedule.errors import OutcomeUncertain, StoreUnavailable
from alma_schedule.model import Ceiling, Routine, RunHandle, RunKey, RunRecord, RunResult
from alma_schedule.model.time import SettableTime
from alma_schedule.stores.base import Store

ORG_CEILING = Ceiling.org_key(SCOPE.org)


class RacingCollectors:
    """Submits on run. Its FIRST collect is collector A: it keeps its handle and, before answering,
    lets collector B run whole (``schedule.collect``). B's collect drives the race: B has read
    ``submitted``; A's handle wins the collecting CAS and A delivers; then B answers ``b_says``."""

    def __init__(self, b_says: RunResult | None) -> None:
        self.b_says = b_says  # None: B's runner raises
        self.schedule: Scheduler | None = None
        self.a: RunHandle | None = None
        self.b_record: RunRecord | None = None
        self.deliveries = 0

    def validate(self, routine: Routine) -> None:
        return None

    def config_revision_inputs(self, routine: Routine) -> dict[str, Any]:
        return {}

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        handle.submit("batch-1", handle.now + HOUR)
        return RunResult.submitted()

    def collect(self, routine: Routine, handle: RunHandle) -> RunResult:
        if self.a is None:  # collector A
            assert self.schedule is not None
            self.a = handle
            self.b_record = self.schedule.collect(handle.key)  # collector B, start to end
            return RunResult.completed("delivered", cost_micros=7)
        # collector B: the engine found the row submitted and asked B's runner to poll
        assert handle.result().state == "submitted"
        assert self.a.begin_collecting()  # meanwhile A wins the CAS ...
        self.deliveries += 1  # ... and delivers
        if self.b_says is None:
            raise ConnectionResetError("B's poll blew up")
        return self.b_says


B_ANSWERS = {
    "gone": RunResult.failed("provider_gone"),
    "expired": RunResult.failed("provider_expired"),
    "revision": RunResult.failed("config_revision_changed", cost_micros=5),
    "raises": None,
}


@every_store
@pytest.mark.parametrize("b_says", list(B_ANSWERS))
def test_a_collector_that_lost_the_collecting_cas_cannot_end_the_run(
    make: Any, clock: SettableTime, b_says: str
) -> None:
    runner = RacingCollectors(B_ANSWERS[b_says])
    sched = make(dispatcher=RecordingDispatcher(), runner_=runner, failure_threshold=1)
    runner.schedule = sched
    sched.register(spec("r1", {"cron": "0 * * * *"}))
    clock.set(T0 + HOUR)
    sched.tick()
    key = sched.dispatcher.runs[0].key
    assert sched.execute(key).state == "submitted"
    clock.set(T0 + HOUR + MINUTE)

    done = sched.collect(key)  # A, with B inside it

    assert runner.b_record is not None and runner.b_record.state == "collecting"  # B lost: nothing written
    assert (done.state, done.reason, done.cost_micros) == ("completed", "delivered", 7)
    assert sched.store.get(RunKey.of(SCOPE, "r1", key.run_id)) == done
    routine = sched.get(SCOPE, "r1")
    assert (routine.consecutive_failures, routine.paused_reason) == (0, None)
    assert runner.deliveries == 1


class SubmitsThenFails:
    """A tracked-task runner: submit (won), then a collector takes the job, then the send "fails"."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def validate(self, routine: Routine) -> None:
        return None

    def config_revision_inputs(self, routine: Routine) -> dict[str, Any]:
        return {}

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        assert handle.submit(None, handle.now + HOUR).won
        assert self.store.begin_collecting(handle.key, now=handle.now).won  # a collector owns it now
        return RunResult.failed("runner_error", error_class="SendFailed")

    def collect(self, routine: Routine, handle: RunHandle) -> RunResult:
        return RunResult.submitted()


@every_store
def test_execute_finishes_only_from_the_state_its_handle_owns(make: Any, clock: SettableTime, store: Store) -> None:
    sched = make(dispatcher=RecordingDispatcher(), runner_=SubmitsThenFails(store))
    sched.register(spec("r1", {"cron": "0 * * * *"}))
    clock.set(T0 + HOUR)
    sched.tick()
    key = sched.dispatcher.runs[0].key
    assert sched.execute(key).state == "collecting"  # the collector's, not execute's, to end
    assert sched.get(SCOPE, "r1").consecutive_failures == 0


# --------------------------------------------------------------------------- OutcomeUncertain


@every_store
def test_an_uncertain_outcome_stays_running_with_its_reservation(
    make: Any, clock: SettableTime, runner: Any, store: Store
) -> None:
    def on_run(routine: Routine, handle: RunHandle) -> None:
        assert handle.reserve(300, [Ceiling(ORG_CEILING, 1_000)]).ok
        raise OutcomeUncertain("provider answered, store did not") from StoreUnavailable("gone")

    runner.on_run = on_run
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    clock.set(T0 + 5 * MINUTE)
    sched.tick()
    key = disp.runs[0].key
    day = (T0 + 5 * MINUTE).date().isoformat()

    rec = sched.execute(key)
    assert (rec.state, rec.reserved_micros, rec.reason) == ("running", 300, None)
    # blocked at once, its cost raised to its reservation (issue 14: never 0 for an uncertain run)
    assert (rec.blocked_why, rec.blocked_at, rec.cost_micros) == ("uncertain_outcome", T0 + 5 * MINUTE, 300)
    assert [k.run_id for k in sched.tick().blocked] == [key.run_id]
    assert store.spend(ORG_CEILING, day) == 300
    assert sched.execute(key) == rec and len(runner.runs) == 1  # a duplicate message runs nothing
    clock.set(T0 + 5 * MINUTE + timedelta(hours=3))  # resends, polls, the next fires: none re-runs it
    report = sched.tick()
    assert key.run_id not in [r.run_id for r in disp.runs[1:]] + [k.run_id for k in report.collect]
    assert key.run_id in [k.run_id for k in report.blocked]  # visible to the operator
    assert len(runner.runs) == 1
    assert sched.get(SCOPE, "r1").consecutive_failures == 0

    res = sched.record(SCOPE, "r1", key.run_id, "failed", "reconciled")
    assert res.won and res.record.reserved_micros == 0
    assert store.spend(ORG_CEILING, day) == 300  # settled at the recorded cost: the bound
