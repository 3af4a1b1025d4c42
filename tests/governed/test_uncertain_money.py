"""Issue 14, defect 2, the scenarios of the issue: the provider BILLS, then the answer is lost (a
connection reset, a gateway 504, a hang past the client's timeout). The real OpenAI adapter over
HTTP to the fake server, the governed conversation runner, the real engine and stores (memory,
SQLite, PostgreSQL).

In each scenario: every run that reached the provider stays ``running``, blocked at once, with its
whole bound as its cost; the org's daily ceiling counts those bounds, so the next runs of the day
are refused before any call, and the sum the provider billed never exceeds the ceiling (0.1.0:
12,600 µ$ billed against a 10,000 µ$ ceiling that saw 0)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from governed_support import ORG_CEILING, SCOPE, Harness, ListSink

from alma_schedule.model import RunRecord
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.adapters.openai import OpenAICompatibleProvider, TokenPrices
from alma_schedule.runners.governed import HostCaps, Prices, create_governed_conversation_runner
from alma_schedule.testing.fake_openai import FakeOpenAI
from alma_schedule.testing.servers import serve_asgi

API_KEY = "sk-test-money-0001"
PRICE_IN, PRICE_OUT = 150_000, 600_000  # micro-USD per million tokens
CEILING = 10_000  # micro-USD a day for the org
GOAL = "Write the morning briefing for the platform team"
BUDGET = {"max_output_tokens": 4_000}  # a bound of about 2,400 µ$: four fit the ceiling
ROUTINES = [f"brief-{i}" for i in range(8)]

FAULTS: dict[str, Callable[[FakeOpenAI], None]] = {
    "a reset after billing": lambda fake: fake.reset_next(100),
    "a gateway 504 after billing": lambda fake: fake.fail_next(100, status=504, billed=True),
    "a hang past the client's timeout": lambda fake: fake.stall_next(100, seconds=30, billed=True),
}


@pytest.fixture
def world(store: Any, clock: SettableTime) -> Iterator[tuple[Harness, FakeOpenAI]]:
    fake = FakeOpenAI(api_key=API_KEY)
    with (
        serve_asgi(fake.app) as server,
        OpenAICompatibleProvider(server.url, API_KEY, "fake-model", PRICE_IN, PRICE_OUT, timeout=0.5) as provider,
    ):
        runner = create_governed_conversation_runner(
            provider=provider,
            sinks=ListSink(),
            prices=Prices(PRICE_IN, PRICE_OUT),
            host=HostCaps(org_daily_micros=CEILING),
        )
        yield Harness(store, runner, clock), fake


def billed(fake: FakeOpenAI) -> int:
    """What the provider billed, in micro-USD, from the fake's own ledger of completions."""
    prices = TokenPrices(PRICE_IN, PRICE_OUT)
    return sum(prices.cost_micros(tokens_in, tokens_out) for tokens_in, tokens_out in fake.billed)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_billed_then_lost_is_counted_and_the_ceiling_holds(world: tuple[Harness, FakeOpenAI], fault: str) -> None:
    h, fake = world
    FAULTS[fault](fake)
    for rid in ROUTINES:
        h.register(rid, goal=GOAL, budget=BUDGET)
    runs: list[RunRecord] = [h.run(rid) for rid in ROUTINES]

    called = [r for r in runs if r.state == "running"]
    refused = [r for r in runs if r.state == "refused"]
    assert len(called) + len(refused) == len(ROUTINES) and called and refused
    bound = called[0].cost_micros
    assert bound > 0 and CEILING - bound < len(called) * bound <= CEILING  # as many as the ceiling admits
    for r in called:  # blocked at once, its whole bound as its cost
        assert (r.blocked_why, r.cost_micros, r.reserved_micros) == ("uncertain_outcome", bound, bound)
    assert {r.reason for r in refused} == {"ceiling_reached"}
    assert len(fake.calls_to("/v1/chat/completions")) == len(called)  # a refused run calls nothing
    assert 0 < billed(fake) <= h.spend(ORG_CEILING) <= CEILING
    report = h.schedule.tick()
    assert set(report.blocked) == {r.key for r in called}

    # the operator records them (no real cost given): settled at the bound, the ceiling unchanged,
    # and the next run of the day is still refused
    for r in called:
        assert h.schedule.record(SCOPE, r.routine_id, r.run_id, "failed", "provider_error").won
    assert h.spend(ORG_CEILING) == len(called) * bound
    assert h.run(ROUTINES[0]).reason == "ceiling_reached"
    assert billed(fake) <= CEILING


def test_recording_what_was_billed_makes_the_ceiling_see_exactly_that(world: tuple[Harness, FakeOpenAI]) -> None:
    h, fake = world
    FAULTS["a reset after billing"](fake)
    for rid in ROUTINES[:3]:
        h.register(rid, goal=GOAL, budget=BUDGET)
    runs = [h.run(rid) for rid in ROUTINES[:3]]
    assert [r.blocked_why for r in runs] == ["uncertain_outcome"] * 3
    prices = TokenPrices(PRICE_IN, PRICE_OUT)
    real = [prices.cost_micros(tokens_in, tokens_out) for tokens_in, tokens_out in fake.billed]
    assert len(real) == 3 and all(0 < cost < runs[0].cost_micros for cost in real)
    for r, cost in zip(runs, real, strict=True):  # the operator read the provider's invoice
        done = h.schedule.record(SCOPE, r.routine_id, r.run_id, "failed", "provider_error", cost_micros=cost)
        assert done.won and done.record is not None and done.record.cost_micros == cost
    assert h.spend(ORG_CEILING) == billed(fake) == sum(real)
