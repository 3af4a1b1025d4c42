"""The governed conversation runner's caps and ceilings, through the real engine and real stores.

Only the provider (the package's ScriptedProvider) and the sink (ListSink) are stand-ins; every
reservation and settlement goes through the store. Split from ``test_conversation.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from conversation_support import BOUND, BUDGET, GOAL, make, ok
from governed_support import ORG_CEILING, SCOPE, routine_ceiling

from alma_schedule.errors import RegistrationRefused
from alma_schedule.model import RunKey
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.governed import HostCaps
from alma_schedule.stores.memory import MemoryStore


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
    h, _, _, _, _ = make(store, clock, [], host=HostCaps(per_run_micros=100_000, routine_daily_micros=200_000))
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

    h, provider, _, _, _ = make(store, clock, [ok()], host=HostCaps(routine_daily_micros=200), build_prompt=build)
    h.register("brief", goal=GOAL, budget=BUDGET)
    rec = h.run("brief")
    assert seen == [BOUND]
    assert (rec.state, rec.reason) == ("refused", "cap_exceeded")
    assert provider.count("run_turn") == 0 and h.spend(routine_ceiling("brief")) == 0
    h.schedule.execute(h.fire("brief"))  # while a reservation could not fit, nothing is built
    assert len(seen) == 2


# --------------------------------------------------------------------------- kills, step by step

#: (how to kill, expected provider calls, what is persisted: session, cost, hash, sink attempts)
