"""The governed conversation runner through the real engine and real stores (memory, SQLite, PostgreSQL).

Only the provider (the package's ScriptedProvider, scripted per test) and the sink (ListSink) are
stand-ins; every row, reservation and transition goes through the store.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from conversation_support import BOUND, BUDGET, GOAL, ledger_text, make, ok
from governed_support import SCOPE, Killed, ListSink, routine_ceiling

from alma_schedule.model import RunKey, governed_key
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.governed import (
    TurnReceipt,
)


def test_a_turn_is_reserved_called_recorded_and_delivered_once(store: Any, clock: SettableTime) -> None:
    h, provider, sink, _, _ = make(store, clock, [ok()])
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    rec = h.schedule.execute(key)

    assert (rec.state, rec.reason, rec.cost_micros) == ("completed", "delivered", 50)
    assert (rec.session_id, rec.turn_id) == ("s1", "t1")
    assert rec.delivery_hash == hashlib.sha256(b"hello").hexdigest()
    assert rec.result_text == "hello"
    assert rec.reserved_micros == 0  # settled
    assert h.spend(routine_ceiling("brief")) == 50
    (request,) = [arg for name, arg in provider.calls if name == "run_turn"]
    assert request.prompt == GOAL
    assert (request.max_cost_micros, request.max_output_tokens) == (BOUND, 100)
    assert request.custom_id == governed_key(SCOPE, "brief", key.run_id)
    (delivery,) = sink.deliveries
    assert delivery.text == "hello" and delivery.cost_micros == 50
    assert delivery.idempotency_key == governed_key(SCOPE, "brief", key.run_id)

    # a replayed message: the engine's CAS loses, the runner is not called again
    again = h.schedule.execute(key)
    assert again == h.get(key)
    assert provider.count("run_turn") == 1 and sink.attempts == 1
    assert h.spend(routine_ceiling("brief")) == 50


@pytest.mark.parametrize("status", ["not_admitted", "routing_unavailable"])
def test_provider_refusal_is_refused_with_zero_cost_and_no_retry(store: Any, clock: SettableTime, status: str) -> None:
    h, provider, sink, _, _ = make(store, clock, [TurnReceipt(status), ok("fixed")])  # type: ignore[arg-type]
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    rec = h.schedule.execute(key)
    assert (rec.state, rec.reason, rec.cost_micros, rec.session_id) == ("refused", status, 0, None)
    assert h.spend(routine_ceiling("brief")) == 0 and sink.attempts == 0
    h.schedule.execute(key)
    assert provider.count("run_turn") == 1  # no retry of that fire
    # a (repaired) configuration serves the NEXT fire
    nxt = h.run("brief")
    assert (nxt.state, nxt.reason) == ("completed", "delivered")
    assert provider.count("run_turn") == 2


def test_an_error_receipt_fails_and_keeps_its_cost(store: Any, clock: SettableTime) -> None:
    h, _, sink, _, _ = make(store, clock, [TurnReceipt("error", "", 20, "s1", "t1", "boom")])
    h.register("brief", goal=GOAL, budget=BUDGET)
    rec = h.run("brief")
    assert (rec.state, rec.reason, rec.cost_micros, rec.session_id) == ("failed", "provider_error", 20, "s1")
    assert h.spend(routine_ceiling("brief")) == 20 and sink.attempts == 0


def test_a_sink_error_fails_once_and_is_never_retried(store: Any, clock: SettableTime) -> None:
    sink = ListSink(fail=RuntimeError("destination said secret-token-123"))
    h, provider, _, _, errors = make(store, clock, [ok()], sink=sink)
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    rec = h.schedule.execute(key)
    assert (rec.state, rec.reason, rec.error_class, rec.cost_micros) == (
        "failed",
        "sink_error",
        "RuntimeError",
        50,
    )
    assert rec.delivery_hash == hashlib.sha256(b"hello").hexdigest()
    assert "secret-token-123" not in ledger_text(h, key)
    assert [e[0] for e in errors] == ["RuntimeError"]
    h.schedule.execute(key)
    assert sink.attempts == 1 and provider.count("run_turn") == 1


def test_duplicate_text_of_the_last_completed_delivery_is_suppressed(store: Any, clock: SettableTime) -> None:
    sink = ListSink()
    h, _, _, _, _ = make(
        store, clock, [ok("same", 10, 1), ok("same", 11, 2), ok("new", 12, 3), ok("new", 13, 4)], sink=sink
    )
    h.register("brief", goal=GOAL, budget=BUDGET)
    first = h.run("brief")
    second = h.run("brief")
    third = h.run("brief")
    assert (first.state, first.reason) == ("completed", "delivered")
    assert (second.state, second.reason, second.cost_micros) == ("completed", "suppressed_duplicate", 11)
    assert (third.state, third.reason) == ("completed", "delivered")
    assert [d.text for d in sink.deliveries] == ["same", "new"]
    assert h.spend(routine_ceiling("brief")) == 10 + 11 + 12  # a duplicate reply keeps its cost
    sink.fail = RuntimeError("down")
    fourth = h.run("brief")  # same text as the last delivery: suppressed before the sink is touched
    assert fourth.reason == "suppressed_duplicate" and sink.attempts == 2


def test_only_a_completed_delivery_suppresses(store: Any, clock: SettableTime) -> None:
    sink = ListSink(fail=RuntimeError("down"))
    h, _, _, _, _ = make(store, clock, [ok("same", 10, 1), ok("same", 10, 2)], sink=sink)
    h.register("brief", goal=GOAL, budget=BUDGET)
    assert h.run("brief").reason == "sink_error"
    sink.fail = None
    rec = h.run("brief")
    assert (rec.state, rec.reason) == ("completed", "delivered")
    assert [d.text for d in sink.deliveries] == ["same"]


KILLS = {
    "at the reservation": (("reserve", 1), 0, (None, 0, False), 0, False),
    "building the request": (("build", 1), 0, (None, 0, False), 0, True),
    "writing the bound as the cost": (("annotate", 1), 0, (None, 0, False), 0, True),
    # from here on the row carries the whole bound as its cost until the receipt: never 0 (issue 14)
    "during the provider call": (("provider", 1), 1, (None, BOUND, False), 0, True),
    "writing the receipt": (("annotate", 2), 1, (None, BOUND, False), 0, True),
    "writing the delivery hash": (("annotate", 3), 1, ("s1", 50, False), 0, True),
    "re-reading before egress": (("result", 2), 1, ("s1", 50, True), 0, True),
    "checking for a duplicate": (("last_delivery_hash", 1), 1, ("s1", 50, True), 0, True),
    "during delivery": (("sink", 1), 1, ("s1", 50, True), 1, True),
}


@pytest.mark.parametrize("step", list(KILLS))
def test_a_kill_at_each_step_leaves_running_and_nothing_is_done_again(
    store: Any, clock: SettableTime, step: str
) -> None:
    (where, nth), calls, (session, cost, hashed), attempts, reserved = KILLS[step]
    sink = ListSink()
    turns: list[Any] = [Killed("provider")] if where == "provider" else [ok(cost=50)]
    built: list[int] = []

    def build(routine: Any, key: RunKey, plan: Any) -> str:
        built.append(1)
        if where == "build":
            raise Killed("build")
        return GOAL

    h, provider, _, wrapped, _ = make(store, clock, turns, sink=sink, build_prompt=build)
    if where == "sink":
        sink.fail = Killed("sink")
    elif where not in ("provider", "build"):
        wrapped.at(where, nth)
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    with pytest.raises(Killed):
        h.schedule.execute(key)

    rec = h.get(key)
    assert rec.state == "running"
    assert (rec.session_id, rec.cost_micros, rec.delivery_hash is not None) == (session, cost, hashed)
    assert rec.reserved_micros == (BOUND if reserved else 0)
    assert provider.count("run_turn") == calls and sink.attempts == attempts

    # nothing retries it: not a re-sent message, not a tick
    assert h.schedule.execute(key).state == "running"
    clock.advance(timedelta(minutes=10))
    h.dispatch.runs.clear()
    h.schedule.tick()
    assert key not in [r.key for r in h.dispatch.runs]
    if reserved and wrapped.handles:  # the runner handed the same row again: no call, charge or delivery
        replay = wrapped.runner.run(store.get_routine(SCOPE, "brief"), wrapped.handles[0]._inner)
        assert (replay.outcome, replay.error_class) == ("failed", "ReplayedRun")
    assert provider.count("run_turn") == calls and sink.attempts == attempts
    assert h.get(key).state == "running"
    assert key in [r.key for r in store.stuck(clock(), timedelta(minutes=5))]

    # the operator's word: final, releases the orphaned reservation, never resends
    res = h.schedule.record(SCOPE, "brief", key.run_id, "failed", "reconciled")
    assert res.won and res.record is not None
    assert (res.record.state, res.record.reason, res.record.reserved_micros) == ("failed", "reconciled", 0)
    assert h.spend(routine_ceiling("brief")) == cost
    assert provider.count("run_turn") == calls and sink.attempts == attempts


def test_an_erasure_before_egress_wins(store: Any, clock: SettableTime) -> None:
    h, _, sink, wrapped, _ = make(store, clock, [ok()])
    h.register("brief", goal=GOAL, budget=BUDGET)
    wrapped.at("result", 2, lambda: store.erase_results(SCOPE))
    rec = h.run("brief")
    assert (rec.state, rec.reason, rec.result_text) == ("completed", "erased", None)
    assert sink.attempts == 0


def test_an_operator_record_before_egress_wins(store: Any, clock: SettableTime) -> None:
    h, _, sink, wrapped, _ = make(store, clock, [ok()])
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    wrapped.at("result", 2, lambda: h.schedule.record(SCOPE, "brief", key.run_id, "failed", "operator"))
    rec = h.schedule.execute(key)
    assert (rec.state, rec.reason) == ("failed", "operator")
    assert sink.attempts == 0


def test_results_are_kept_for_the_retention_then_erased_and_the_row_stays(store: Any, clock: SettableTime) -> None:
    h, _, _, _, _ = make(store, clock, [ok()], result_retention=timedelta(hours=1))
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    rec = h.schedule.execute(key)
    assert rec.erase_at == clock() + timedelta(hours=1) and rec.result_text == "hello"
    clock.advance(timedelta(hours=2))
    h.schedule.tick()
    rec = h.get(key)
    assert (rec.state, rec.reason, rec.result_text) == ("completed", "delivered", None)
    assert rec.delivery_hash is not None  # suppression and replay protection outlive the text
