"""The governed batch runner through the real engine and real stores: submit once, poll, repair the
cost, deliver only as the winner of ``submitted -> collecting``, and every way a job ends."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from governed_support import SCOPE, Harness, Interrupting, Killed, ListSink, routine_ceiling

from alma_schedule.errors import ProviderError
from alma_schedule.model import RunKey, governed_key
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.governed import (
    BatchReceipt,
    BatchStatus,
    HostCaps,
    Prices,
    ScriptedProvider,
    create_governed_batch_runner,
)

PRICES = Prices(1_000_000, 1_000_000)
GOAL = "Digest"  # 6 bytes + 64 framing tokens: input bound 70; with 100 output tokens the bound is 170
BOUND = 170
BUDGET = {"max_output_tokens": 100}
DEADLINE = timedelta(hours=2)
FIRST_POLL = timedelta(minutes=1)


def make(
    store: Any,
    clock: SettableTime,
    *,
    submits: list[Any] | None = None,
    polls: list[Any] | None = None,
    sink: ListSink | None = None,
) -> tuple[Harness, ScriptedProvider, ListSink, Interrupting, list[Any]]:
    provider = ScriptedProvider(submits=submits or [], polls=polls or [])
    sink = sink or ListSink()
    errors: list[Any] = []
    runner = create_governed_batch_runner(
        provider=provider,
        sinks=sink,
        prices=PRICES,
        host=HostCaps(routine_daily_micros=10_000),
        submission_deadline=DEADLINE,
        poll_first=FIRST_POLL,
        on_background_error=lambda exc, key: errors.append((type(exc).__name__, key)),
    )
    wrapped = Interrupting(runner)
    return Harness(store, wrapped, clock), provider, sink, wrapped, errors


def submitted(h: Harness, routine_id: str = "digest") -> RunKey:
    key = h.fire(routine_id)
    rec = h.schedule.execute(key)
    assert rec.state == "submitted", rec
    return key


def test_submit_once_poll_repair_and_deliver(store: Any, clock: SettableTime) -> None:
    h, provider, sink, _, _ = make(
        store,
        clock,
        polls=[BatchStatus("pending", cost_micros=30), BatchStatus("succeeded", "the digest", 45)],
    )
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = submitted(h)
    rec = h.get(key)
    assert rec.batch_id == "scripted-" + governed_key(SCOPE, "digest", key.run_id)
    assert rec.deadline == h.clock() + DEADLINE
    assert rec.next_poll_at == h.clock() + FIRST_POLL
    assert rec.reserved_micros == BOUND and h.spend(routine_ceiling("digest")) == BOUND
    (request,) = [a for n, a in provider.calls if n == "submit"]
    assert request.custom_id == governed_key(SCOPE, "digest", key.run_id)
    assert (request.max_cost_micros, request.max_output_tokens) == (BOUND, 100)

    h.schedule.tick()  # not yet due for a poll
    assert h.dispatch.collects == []
    clock.advance(FIRST_POLL)
    h.schedule.tick()
    assert [r.key for r in h.dispatch.collects] == [key]
    rec = h.collect(key)
    assert (rec.state, rec.cost_micros) == ("submitted", 30)  # cost repaired while pending
    rec = h.collect(key)
    assert (rec.state, rec.reason, rec.cost_micros) == ("completed", "delivered", 45)
    assert [d.text for d in sink.deliveries] == ["the digest"]
    assert h.spend(routine_ceiling("digest")) == 45 and rec.reserved_micros == 0
    # a stale collect message: the row is terminal, nothing polls, nothing is written
    assert h.collect(key) == rec
    assert provider.count("submit") == 1 and provider.count("poll") == 2 and sink.attempts == 1


def test_only_the_winner_of_collecting_delivers(store: Any, clock: SettableTime) -> None:
    h, provider, sink, wrapped, _ = make(
        store, clock, polls=[BatchStatus("succeeded", "one", 9), BatchStatus("succeeded", "one", 9)]
    )
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = submitted(h)
    others: list[Any] = []
    # a second collector runs to the end while the first is about to take the collecting CAS
    wrapped.at("begin_collecting", 1, lambda: others.append(h.collect(key)))
    rec = h.collect(key)
    assert others[0].state == "completed" and rec.state == "completed"
    assert sink.attempts == 1 and provider.count("poll") == 2 and provider.count("submit") == 1


def test_changed_configuration_repairs_cost_and_fails_without_delivery(store: Any, clock: SettableTime) -> None:
    h, provider, sink, _, _ = make(store, clock, polls=[BatchStatus("succeeded", "old sink's text", 60)])
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = submitted(h)
    h.register("digest", "job", goal="Digest, differently", budget=BUDGET)
    rec = h.collect(key)
    assert (rec.state, rec.reason, rec.cost_micros) == ("failed", "config_revision_changed", 60)
    assert sink.attempts == 0 and provider.count("submit") == 1
    assert h.spend(routine_ceiling("digest")) == 60
    assert store.get_routine(SCOPE, "digest").consecutive_failures == 0


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (BatchStatus("expired", cost_micros=3), "provider_expired"),
        (BatchStatus("failed", cost_micros=3), "provider_failed"),
        (BatchStatus("gone"), "provider_gone"),
        (ProviderError("404 for batch", reason="provider_gone"), "provider_gone"),
    ],
)
def test_provider_final_states_fail_with_their_reason(
    store: Any, clock: SettableTime, answer: Any, reason: str
) -> None:
    h, _, sink, _, _ = make(store, clock, polls=[answer])
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = submitted(h)
    rec = h.collect(key)
    assert (rec.state, rec.reason) == ("failed", reason)
    # a batch the provider no longer knows was created (the request left): it keeps the bound
    # written before the submission, never 0 (issue 14)
    expected = BOUND if reason == "provider_gone" else 3
    assert rec.cost_micros == expected and h.spend(routine_ceiling("digest")) == expected
    assert sink.attempts == 0


def test_a_transient_poll_error_waits_for_the_next_poll(store: Any, clock: SettableTime) -> None:
    h, provider, sink, _, errors = make(
        store,
        clock,
        polls=[ProviderError("503 secret", reason="provider_error"), BatchStatus("succeeded", "late", 4)],
    )
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = submitted(h)
    assert h.collect(key).state == "submitted"
    assert errors == [("ProviderError", key)]
    assert h.collect(key).reason == "delivered"
    assert provider.count("submit") == 1 and sink.attempts == 1


def test_past_the_deadline_the_engine_times_out_without_polling(store: Any, clock: SettableTime) -> None:
    h, provider, sink, _, _ = make(store, clock)
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = submitted(h)
    clock.advance(DEADLINE + h.settings.clock_tolerance + timedelta(seconds=1))  # timed_out past the tolerance
    rec = h.collect(key)
    assert (rec.state, rec.reason) == ("timed_out", "deadline_passed")
    assert provider.count("poll") == 0 and sink.attempts == 0
    assert rec.reserved_micros == 0


def test_submission_cost_is_recorded(store: Any, clock: SettableTime) -> None:
    h, _, _, _, _ = make(store, clock, submits=[BatchReceipt("b-1", cost_micros=7)])
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = submitted(h)
    rec = h.get(key)
    assert (rec.batch_id, rec.cost_micros) == ("b-1", 7)


# --------------------------------------------------------------------------- kills

RUN_KILLS = {
    "at the reservation": (("reserve", 1), 0, False, 0),
    "writing the bound as the cost": (("annotate", 1), 0, True, 0),
    # from here on the row carries the whole bound as its cost: record settles there (issue 14)
    "during submission": (("provider", 1), 1, True, BOUND),
    "recording the submission": (("submit", 1), 1, True, BOUND),
}


@pytest.mark.parametrize("step", list(RUN_KILLS))
def test_a_kill_while_submitting_never_submits_anew(store: Any, clock: SettableTime, step: str) -> None:
    (where, nth), submits, reserved, settled = RUN_KILLS[step]
    h, provider, _, wrapped, _ = make(store, clock, submits=[Killed("x")] if where == "provider" else [])
    if where != "provider":
        wrapped.at(where, nth)
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = h.fire("digest")
    with pytest.raises(Killed):
        h.schedule.execute(key)
    rec = h.get(key)
    assert (rec.state, rec.batch_id, rec.reserved_micros) == ("running", None, BOUND if reserved else 0)
    h.schedule.execute(key)
    clock.advance(timedelta(hours=1))
    h.schedule.tick()
    h.collect(key)  # a collect never submits, and only acts on submitted rows
    assert provider.count("submit") == submits and provider.count("poll") == 0
    res = h.schedule.record(SCOPE, "digest", key.run_id, "failed", "reconciled")
    assert res.record is not None and res.record.reserved_micros == 0
    assert res.record.cost_micros == settled and h.spend(routine_ceiling("digest")) == settled


COLLECT_KILLS = {
    "taking the collecting CAS": (("begin_collecting", 1), "submitted", False, 0),
    "writing the delivery hash": (("annotate", 2), "collecting", False, 0),  # #1: the cost repaired to 0
    "re-reading before egress": (("result", 2), "collecting", True, 0),
    "during delivery": (("sink", 1), "collecting", True, 1),
}


@pytest.mark.parametrize("step", list(COLLECT_KILLS))
def test_a_kill_while_collecting_never_delivers_twice(store: Any, clock: SettableTime, step: str) -> None:
    (where, nth), state, hashed, attempts = COLLECT_KILLS[step]
    sink = ListSink(fail=Killed("sink") if where == "sink" else None)
    h, provider, _, wrapped, _ = make(
        store,
        clock,
        sink=sink,
        polls=[BatchStatus("succeeded", "text", 0), BatchStatus("succeeded", "text", 0)],
    )
    h.register("digest", "job", goal=GOAL, budget=BUDGET)
    key = submitted(h)
    if where != "sink":
        wrapped.at(where, nth)
    with pytest.raises(Killed):
        h.collect(key)
    rec = h.get(key)
    assert (rec.state, rec.delivery_hash is not None) == (state, hashed)
    sink.fail = None
    again = h.collect(key)
    if state == "submitted":  # killed before the CAS: the next collect is the one that delivers
        assert (again.state, again.reason) == ("completed", "delivered")
        assert sink.attempts == 1 and provider.count("poll") == 2
    else:  # the collecting winner died: nobody delivers again; the operator reconciles
        assert again.state == "collecting"
        assert sink.attempts == attempts and provider.count("poll") == 1
        assert key in [r.key for r in store.stuck(clock() + timedelta(hours=1), timedelta(minutes=5))]
        res = h.schedule.record(SCOPE, "digest", key.run_id, "completed", "reconciled")
        assert res.won and h.spend(routine_ceiling("digest")) == 0
    assert provider.count("submit") == 1


def test_a_repaired_cost_records_a_crossing_and_alerts_once(store: Any, clock: SettableTime) -> None:
    alerts: list[tuple[Any, ...]] = []
    provider = ScriptedProvider(
        polls=[
            BatchStatus("pending", cost_micros=50),
            BatchStatus("pending", cost_micros=55),
            BatchStatus("succeeded", "t", 60),
        ]
    )
    sink = ListSink()
    runner = create_governed_batch_runner(
        provider=provider,
        sinks=sink,
        prices=PRICES,
        submission_deadline=DEADLINE,
        on_cap_crossed=lambda *a: alerts.append(a),
    )
    h = Harness(store, runner, clock)
    h.register("digest", "job", goal=GOAL, budget={**BUDGET, "per_run_usd": {"usd": 0.00003, "on_exceeded": "warn"}})
    key = submitted(h)
    assert h.collect(key).caps_crossed == ("routine_per_run",)
    assert h.collect(key).cost_micros == 55
    rec = h.collect(key)
    assert (rec.state, rec.cost_micros, rec.caps_crossed) == ("completed", 60, ("routine_per_run",))
    assert sink.deliveries[0].caps_crossed == ("routine_per_run",)
    assert alerts == [(key, "routine_per_run", 50, 30)]  # one alert per (scope, run, cap)
