"""The governed conversation runner through the real engine and real stores (memory, SQLite, PostgreSQL).

Only the provider (the package's ScriptedProvider, scripted per test) and the sink (ListSink) are
stand-ins; every row, reservation and transition goes through the store.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from governed_support import ORG_CEILING, SCOPE, Harness, Interrupting, Killed, ListSink, routine_ceiling

from alma_schedule.errors import ProviderError, RegistrationRefused
from alma_schedule.model import RunKey, governed_key
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.governed import (
    HostCaps,
    Prices,
    ScriptedProvider,
    TurnReceipt,
    create_governed_conversation_runner,
)
from alma_schedule.stores.memory import MemoryStore

#: One micro-USD per token both ways: the goal "Brief me" (8 bytes + 64 framing tokens) bounds the
#: input at 72 micro-USD; max_output_tokens 100 makes the hard bound 172.
PRICES = Prices(1_000_000, 1_000_000)
GOAL = "Brief me"
BOUND = 172
BUDGET = {"max_output_tokens": 100}


def ok(text: str = "hello", cost: int = 50, n: int = 1) -> TurnReceipt:
    return TurnReceipt("ok", text, cost, f"s{n}", f"t{n}")


def make(
    store: Any,
    clock: SettableTime,
    turns: list[Any],
    *,
    sink: ListSink | None = None,
    host: HostCaps | None = None,
    **kw: Any,
) -> tuple[Harness, ScriptedProvider, ListSink, Interrupting, list[Any]]:
    provider = ScriptedProvider(turns=turns)
    sink = sink or ListSink()
    errors: list[Any] = []
    runner = create_governed_conversation_runner(
        provider=provider,
        sinks=sink,
        prices=PRICES,
        host=host or HostCaps(routine_daily_micros=10_000),
        on_background_error=lambda exc, key: errors.append((type(exc).__name__, str(exc), key)),
        **kw,
    )
    wrapped = Interrupting(runner)
    return Harness(store, wrapped, clock), provider, sink, wrapped, errors


def ledger_text(h: Harness, key: RunKey) -> str:
    return repr(h.get(key).to_dict())


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
def test_provider_refusal_is_refused_with_zero_cost_and_no_retry(
    store: Any, clock: SettableTime, status: str
) -> None:
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


@pytest.mark.parametrize(
    ("exc", "reason", "kept"),
    [
        (
            ProviderError("upstream said: secret-token-123", reason="provider_timeout"),
            "provider_timeout",
            BOUND,
        ),
        (ProviderError("upstream said: secret-token-123"), "provider_error", 0),
        (RuntimeError("socket secret-token-123"), "provider_error", 0),
    ],
)
def test_provider_exceptions_fail_with_a_closed_reason(
    store: Any, clock: SettableTime, exc: Exception, reason: str, kept: int
) -> None:
    h, provider, sink, _, errors = make(store, clock, [exc])
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    rec = h.schedule.execute(key)
    assert (rec.state, rec.reason, rec.error_class) == ("failed", reason, type(exc).__name__)
    assert rec.cost_micros == kept  # a timeout is uncertain: the bound stays charged
    assert h.spend(routine_ceiling("brief")) == kept
    assert "secret-token-123" not in ledger_text(h, key)
    assert errors and errors[0][1] == str(exc) and errors[0][2] == key
    assert sink.attempts == 0
    h.schedule.execute(key)
    assert provider.count("run_turn") == 1


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


def test_warn_records_the_crossing_before_delivery_and_alerts_once(store: Any, clock: SettableTime) -> None:
    alerts: list[tuple[Any, ...]] = []
    h, provider, sink, _, _ = make(store, clock, [ok(cost=50)], on_cap_crossed=lambda *a: alerts.append(a))
    h.register("brief", goal=GOAL, budget={**BUDGET, "per_turn_usd": {"usd": 0.00003, "on_exceeded": "warn"}})
    key = h.fire("brief")
    rec = h.schedule.execute(key)
    assert (rec.state, rec.reason, rec.cost_micros) == ("completed", "delivered", 50)
    assert rec.caps_crossed == ("routine_per_run",)
    assert sink.deliveries[0].caps_crossed == ("routine_per_run",)
    assert alerts == [(key, "routine_per_run", 50, 30)]
    # a warn cap is no hard bound: the request still carries the token bound
    assert provider.calls[0][1].max_cost_micros == BOUND


def test_block_cap_narrows_the_request(store: Any, clock: SettableTime) -> None:
    h, provider, _, _, _ = make(store, clock, [ok(cost=40)])
    h.register("brief", goal=GOAL, budget={**BUDGET, "per_turn_usd": 0.0001})  # a bare number blocks
    rec = h.run("brief")
    assert (rec.state, rec.caps_crossed) == ("completed", ())
    request = provider.calls[0][1]
    assert request.max_cost_micros == 100
    assert request.max_output_tokens == 100 - 72  # what the cap leaves after the prompt's bound


def test_block_refuses_before_the_call(store: Any, clock: SettableTime) -> None:
    with pytest.raises(RegistrationRefused, match="no room"):
        make(store, clock, [])[0].register("brief", goal=GOAL, budget={"per_turn_usd": 0.00005})
    # a host cap lowered after registration: the run is refused before any call
    h, _, _, _, _ = make(store, clock, [], host=HostCaps())
    h.register("brief2", goal=GOAL, budget=BUDGET)
    h2, provider2, sink2, _, _ = make(store, clock, [ok()], host=HostCaps(per_run_micros=50))
    rec = h2.run("brief2")
    assert (rec.state, rec.reason, rec.cost_micros) == ("refused", "cap_exceeded", 0)
    assert provider2.count("run_turn") == 0 and sink2.attempts == 0


@pytest.mark.parametrize(
    ("host", "budget", "match"),
    [
        (HostCaps(per_run_micros=100_000), {"per_turn_usd": 0.2}, "widens the host cap"),
        (
            HostCaps(per_run_micros=100_000),
            {"per_turn_usd": {"usd": 0.2, "on_exceeded": "warn"}},
            "widens the host cap",
        ),
        (
            HostCaps(routine_daily_micros=1000),
            {**BUDGET, "daily_usd": 0.002},
            "widens the host routine ceiling",
        ),
        (HostCaps(org_daily_micros=1000), {}, "hard per-run bound"),
        (HostCaps(routine_daily_micros=100), BUDGET, "exceeds the daily ceiling"),
        (HostCaps(), {"per_turn_usd": {"usd": 0.1, "on_exceeded": "maybe"}}, "on_exceeded"),
        (HostCaps(), {"per_turn": 0.1}, "unknown fields"),
    ],
)
def test_registration_refuses_widening_and_unbounded_ceilings(
    clock: SettableTime, host: HostCaps, budget: dict[str, Any], match: str
) -> None:
    store = MemoryStore()  # refused before any write: one backend is enough
    h, _, _, _, _ = make(store, clock, [], host=host)
    with pytest.raises(RegistrationRefused, match=match):
        h.register("brief", goal=GOAL, budget=budget)
    assert store.get_routine(SCOPE, "brief") is None


def test_narrowing_is_accepted(store: Any, clock: SettableTime) -> None:
    h, _, _, _, _ = make(
        store, clock, [], host=HostCaps(per_run_micros=100_000, routine_daily_micros=200_000)
    )
    h.register("brief", goal=GOAL, budget={"per_turn_usd": 0.05, "daily_usd": 0.1})
    assert store.get_routine(SCOPE, "brief") is not None


def test_ceilings_reserve_the_bound_and_settle_to_the_real_cost(store: Any, clock: SettableTime) -> None:
    h, provider, _, _, _ = make(
        store,
        clock,
        [ok("a", BOUND, 1), ok("b", BOUND, 2), ok("c", 5, 3)],
        host=HostCaps(routine_daily_micros=400, org_daily_micros=10_000),
    )
    h.register("brief", goal=GOAL, budget=BUDGET)
    assert h.run("brief").reason == "delivered"
    assert h.run("brief").reason == "delivered"
    third = h.run("brief")  # 344 + 172 > 400
    assert (third.state, third.reason, third.cost_micros) == ("refused", "ceiling_reached", 0)
    assert provider.count("run_turn") == 2
    assert h.spend(routine_ceiling("brief")) == 2 * BOUND and h.spend(ORG_CEILING) == 2 * BOUND
    clock.advance(timedelta(days=1))  # a new money day
    assert h.run("brief").reason == "delivered"
    assert h.spend(routine_ceiling("brief")) == 5


def test_the_request_is_built_only_after_the_reservation(store: Any, clock: SettableTime) -> None:
    seen: list[int] = []

    def build(routine: Any, key: RunKey, plan: Any) -> str:
        rec = store.get(RunKey.of(key.scope, key.routine_id, key.run_id))
        seen.append(rec.reserved_micros)
        return "context " * 100  # longer than the input bound the reservation assumed

    h, provider, _, _, _ = make(
        store, clock, [ok()], host=HostCaps(routine_daily_micros=200), build_prompt=build
    )
    h.register("brief", goal=GOAL, budget=BUDGET)
    rec = h.run("brief")
    assert seen == [BOUND]
    assert (rec.state, rec.reason) == ("refused", "cap_exceeded")
    assert provider.count("run_turn") == 0 and h.spend(routine_ceiling("brief")) == 0
    h.schedule.execute(h.fire("brief"))  # while a reservation could not fit, nothing is built
    assert len(seen) == 2


# --------------------------------------------------------------------------- kills, step by step

#: (how to kill, expected provider calls, what is persisted: session, cost, hash, sink attempts)
KILLS = {
    "at the reservation": (("reserve", 1), 0, (None, 0, False), 0, False),
    "building the request": (("build", 1), 0, (None, 0, False), 0, True),
    "during the provider call": (("provider", 1), 1, (None, 0, False), 0, True),
    "writing the receipt": (("annotate", 1), 1, (None, 0, False), 0, True),
    "writing the delivery hash": (("annotate", 2), 1, ("s1", 50, False), 0, True),
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


def test_results_are_kept_for_the_retention_then_erased_and_the_row_stays(
    store: Any, clock: SettableTime
) -> None:
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
