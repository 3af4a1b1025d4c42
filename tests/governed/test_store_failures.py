"""A store that fails right after a successful provider call, and collectors racing to end a run.

The store under these runners is real (memory, SQLite, PostgreSQL); :class:`FlakyStore` only makes
ONE chosen call raise :class:`StoreUnavailable` (before it reaches the store, or after it committed:
the answer lost on the way back). What is under test is the runner and the engine:

* once the provider accepted the request, a failure to persist never finishes the run at cost 0:
  the row stays ``running`` with its whole bound reserved and as its cost, blocked at once, nothing
  re-runs it, and the operator's ``record`` settles it (at the bound unless told the real cost);
* a collector that did not win ``submitted -> collecting`` never ends the run;
* a tenant with ids of the maximum length runs like any other (fixed-length ceiling keys).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from governed_support import SCOPE, Harness, Interrupting, Killed, ListSink, routine_ceiling

from alma_schedule.errors import StoreUnavailable
from alma_schedule.model import MAX_ID_LENGTH, Ceiling, RoutineSpec, RunKey, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.governed import (
    BatchReceipt,
    BatchStatus,
    HostCaps,
    Prices,
    ScriptedProvider,
    TurnReceipt,
    create_governed_batch_runner,
    create_governed_conversation_runner,
)

PRICES = Prices(1_000_000, 1_000_000)
GOAL = "Brief me"  # 8 bytes + 64 framing tokens: input bound 72; with 100 output tokens the bound is 172
BOUND = 172
BUDGET = {"max_output_tokens": 100}
HOST = HostCaps(routine_daily_micros=10_000, org_daily_micros=100_000)


class FlakyStore:
    """A real store; the ``nth`` call of ``method`` raises :class:`StoreUnavailable` once, before the
    store sees it (``committed=False``) or after it committed (the reply was lost)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.arm: tuple[str, int, bool] | None = None
        self.calls: dict[str, int] = {}
        self.failed = 0

    def fail(self, method: str, nth: int = 1, *, committed: bool = False) -> None:
        self.arm = (method, nth, committed)
        self.calls = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if self.arm is None or name != self.arm[0] or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            n = self.calls[name] = self.calls.get(name, 0) + 1
            assert self.arm is not None
            hit = n == self.arm[1]
            if hit and not self.arm[2]:
                self.failed += 1
                raise StoreUnavailable(f"connection lost during {name}")
            out = attr(*args, **kwargs)
            if hit:
                self.failed += 1
                raise StoreUnavailable(f"connection lost after {name} committed")
            return out

        return call


def conversation(
    store: Any, clock: SettableTime, turns: list[Any]
) -> tuple[Harness, ScriptedProvider, ListSink, list[Any]]:
    provider = ScriptedProvider(turns=turns)
    sink = ListSink()
    errors: list[Any] = []
    runner = create_governed_conversation_runner(
        provider=provider,
        sinks=sink,
        prices=PRICES,
        host=HOST,
        on_background_error=lambda exc, key: errors.append(type(exc).__name__),
    )
    return Harness(store, runner, clock), provider, sink, errors


def batch(
    store: Any, clock: SettableTime, polls: list[Any], submits: list[Any] | None = None
) -> tuple[Harness, ScriptedProvider, ListSink, Interrupting, list[Any]]:
    provider = ScriptedProvider(submits=submits or [], polls=polls)
    sink = ListSink()
    errors: list[Any] = []
    runner = create_governed_batch_runner(
        provider=provider,
        sinks=sink,
        prices=PRICES,
        host=HOST,
        submission_deadline=timedelta(hours=2),
        poll_first=timedelta(minutes=1),
        on_background_error=lambda exc, key: errors.append(type(exc).__name__),
    )
    wrapped = Interrupting(runner)
    return Harness(store, wrapped, clock), provider, sink, wrapped, errors


def nothing_reruns(h: Harness, key: RunKey) -> None:
    """A duplicate run message, later ticks (resends, polls) and a stray collect do nothing."""
    assert h.schedule.execute(key).state == "running"
    h.clock.advance(timedelta(hours=1))
    h.dispatch.runs.clear()
    h.dispatch.collects.clear()
    h.schedule.tick()
    assert key not in [r.key for r in h.dispatch.runs + h.dispatch.collects]
    assert h.collect(key).state == "running"
    assert key in [r.key for r in h.store.stuck(h.clock(), timedelta(minutes=5))]


# --------------------------------------------------------------------------- failing after the call


def test_a_turn_whose_receipt_cannot_be_recorded_stays_running_and_charged(store: Any, clock: SettableTime) -> None:
    flaky = FlakyStore(store)
    h, provider, sink, errors = conversation(flaky, clock, [TurnReceipt("ok", "hello", 50, "s1", "t1")])
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    flaky.fail("annotate", 2)  # the receipt (cost, session, turn): the first write after the call (#1: the bound)

    rec = h.schedule.execute(key)

    assert flaky.failed == 1 and "StoreUnavailable" in errors
    # the cost written before the call is the whole bound; the run is blocked at once (issue 14)
    assert (rec.state, rec.reserved_micros, rec.cost_micros) == ("running", BOUND, BOUND)
    assert rec.blocked_why == "uncertain_outcome"
    assert h.get(key) == rec
    assert h.spend(routine_ceiling("brief")) == BOUND  # the provider may have charged: the bound stays
    nothing_reruns(h, key)
    assert provider.count("run_turn") == 1 and sink.attempts == 0
    assert store.get_routine(SCOPE, "brief").consecutive_failures == 0

    res = h.schedule.record(SCOPE, "brief", key.run_id, "failed", "reconciled")
    assert res.won and res.record is not None and res.record.reserved_micros == 0
    assert h.spend(routine_ceiling("brief")) == BOUND  # settled at the recorded cost: the bound, never 0
    assert provider.count("run_turn") == 1


def test_a_batch_whose_submission_cannot_be_recorded_stays_running_and_charged(store: Any, clock: SettableTime) -> None:
    flaky = FlakyStore(store)
    h, provider, _, _, errors = batch(flaky, clock, polls=[])
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = h.fire("digest")
    flaky.fail("submit", 1)

    rec = h.schedule.execute(key)

    assert flaky.failed == 1 and "StoreUnavailable" in errors
    assert (rec.state, rec.batch_id, rec.reserved_micros, rec.cost_micros) == ("running", None, BOUND, BOUND)
    assert rec.blocked_why == "uncertain_outcome"
    assert h.spend(routine_ceiling("digest")) == BOUND
    nothing_reruns(h, key)
    assert provider.count("submit") == 1 and provider.count("poll") == 0

    res = h.schedule.record(SCOPE, "digest", key.run_id, "failed", "reconciled")
    assert res.won and res.record is not None and res.record.reserved_micros == 0
    assert h.spend(routine_ceiling("digest")) == BOUND and provider.count("submit") == 1


def test_a_submission_recorded_but_unacknowledged_is_collected(store: Any, clock: SettableTime) -> None:
    flaky = FlakyStore(store)
    h, provider, sink, _, _ = batch(flaky, clock, polls=[BatchStatus("succeeded", "the digest", 45)])
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = h.fire("digest")
    flaky.fail("submit", 1, committed=True)
    assert h.schedule.execute(key).state == "submitted"  # re-read: the write did land
    clock.advance(timedelta(minutes=1))
    done = h.collect(key)
    assert (done.state, done.reason, done.cost_micros) == ("completed", "delivered", 45)
    assert provider.count("submit") == 1 and sink.attempts == 1


@pytest.mark.parametrize("where", ["submission cost", "polled cost"])
def test_a_cost_that_cannot_be_recorded_leaves_the_batch_submitted(store: Any, clock: SettableTime, where: str) -> None:
    flaky = FlakyStore(store)
    h, provider, sink, _, _ = batch(
        flaky,
        clock,
        # a receipt with a cost: the run annotates it right after the submitted write
        submits=[BatchReceipt("batch-1", 30)] if where == "submission cost" else [],
        polls=[BatchStatus("succeeded", "the digest", 45), BatchStatus("succeeded", "the digest", 45)],
    )
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = h.fire("digest")
    if where == "submission cost":
        flaky.fail("annotate", 2)  # #1 is the bound written before the call
    rec = h.schedule.execute(key)
    assert (rec.state, rec.reserved_micros) == ("submitted", BOUND)
    clock.advance(timedelta(minutes=1))
    if where == "polled cost":
        flaky.fail("annotate", 1)  # the repair of the polled cost
        again = h.collect(key)
        assert (again.state, again.reserved_micros) == ("submitted", BOUND)  # nothing finished
        assert h.spend(routine_ceiling("digest")) == BOUND
    done = h.collect(key)
    assert (done.state, done.reason, done.cost_micros) == ("completed", "delivered", 45)
    assert h.spend(routine_ceiling("digest")) == 45 and sink.attempts == 1 and provider.count("submit") == 1


# --------------------------------------------------------------------------- a collector that lost


def test_a_collector_that_lost_the_cas_never_ends_the_run(store: Any, clock: SettableTime) -> None:
    """B has read ``submitted`` and polled ``failed``; meanwhile A polls ``succeeded``, wins
    ``collecting`` and dies before the sink. B must not end A's run: it stays ``collecting`` for the
    operator, the streak untouched."""
    h, provider, sink, wrapped, _ = batch(
        store, clock, polls=[BatchStatus("failed", cost_micros=45), BatchStatus("succeeded", "the digest", 45)]
    )
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = h.fire("digest")
    assert h.schedule.execute(key).state == "submitted"

    def collector_a() -> None:
        wrapped.at("last_delivery_hash", 1)  # A dies after its CAS, before the sink
        with pytest.raises(Killed):
            h.collect(key)
        assert h.get(key).state == "collecting"

    wrapped.at("annotate", 1, collector_a)  # B repairs the polled cost: A runs meanwhile
    b = h.collect(key)

    assert provider.count("poll") == 2 and sink.attempts == 0
    assert b.state == "collecting" and h.get(key) == b
    assert store.get_routine(SCOPE, "digest").consecutive_failures == 0
    res = h.schedule.record(SCOPE, "digest", key.run_id, "failed", "reconciled")
    assert res.won and h.spend(routine_ceiling("digest")) == 45


# --------------------------------------------------------------------------- long ids


def test_a_tenant_with_max_length_ids_runs(store: Any, clock: SettableTime) -> None:
    scope = Scope("o" * MAX_ID_LENGTH, "ü" * MAX_ID_LENGTH)
    rid = "r/" + "x" * (MAX_ID_LENGTH - 2)
    h, _, _, _ = conversation(store, clock, [TurnReceipt("ok", "hello", 50, "s1", "t1")])
    definition = {"goal": GOAL, "budget": BUDGET}
    h.schedule.register(RoutineSpec(scope.org, scope.uid, rid, "turn", {"cron": "0 8 * * *"}, definition))
    clock.advance(timedelta(seconds=1))
    key = h.schedule.trigger(scope, rid).key
    rec = h.schedule.execute(key)
    assert (rec.state, rec.reason, rec.cost_micros) == ("completed", "delivered", 50)
    assert h.spend(Ceiling.routine_key(scope.org, scope.uid, rid)) == 50
    assert h.spend(Ceiling.org_key(scope.org)) == 50
