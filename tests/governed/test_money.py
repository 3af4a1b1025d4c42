"""The money rules as pure functions: USD parsing, budgets, the hard bound, ceilings, crossings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from alma_schedule.errors import RegistrationRefused
from alma_schedule.model import Ceiling, Routine
from alma_schedule.runners.governed.money import (
    FRAMING_TOKENS,
    HostCaps,
    Prices,
    parse_budget,
    plan_money,
    usd_to_micros,
    validate_budget,
)

T = datetime(2026, 1, 1, tzinfo=UTC)
PRICES = Prices(input_per_mtok_micros=2_000_000, output_per_mtok_micros=4_000_000)  # 2 and 4 micros/token


def routine(goal: str = "x" * 36, **budget: Any) -> Routine:
    definition: dict[str, Any] = {"goal": goal}
    if budget:
        definition["budget"] = budget
    return Routine("o", "u", "r", "turn", {"cron": "0 8 * * *"}, definition, T, "rev")


@pytest.mark.parametrize(
    ("value", "micros"), [(0.5, 500_000), (1, 1_000_000), ("0.000001", 1), (0, 0), (0.1 + 0.2, None)]
)
def test_usd_to_micros_is_exact(value: Any, micros: int | None) -> None:
    if micros is None:  # 0.30000000000000004 is finer than a micro-USD
        with pytest.raises(RegistrationRefused, match="finer"):
            usd_to_micros("x", value)
    else:
        assert usd_to_micros("x", value) == micros


@pytest.mark.parametrize("value", [-1, True, None, "abc", float("inf"), float("nan"), [1]])
def test_usd_to_micros_refuses_nonsense(value: Any) -> None:
    with pytest.raises(RegistrationRefused):
        usd_to_micros("x", value)


def test_parse_budget_reads_policies() -> None:
    b = parse_budget({"budget": {"per_turn_usd": {"usd": 0.5, "on_exceeded": "warn"}, "daily_usd": 2}})
    assert (b.per_run_micros, b.per_run_policy, b.daily_micros) == (500_000, "warn", 2_000_000)
    assert parse_budget({"budget": {"per_run_usd": 0.25}}).per_run_policy == "block"  # numbers block
    assert parse_budget({}).per_run_micros is None
    for bad in (
        {"budget": {"per_turn_usd": 1, "per_run_usd": 1}},
        {"budget": {"daily_usd": {"usd": 1, "on_exceeded": "warn"}}},  # a ceiling always blocks
        {"budget": {"max_output_tokens": 0}},
        {"budget": {"per_turn_usd": {"on_exceeded": "warn"}}},
        {"budget": []},
    ):
        with pytest.raises(RegistrationRefused):
            parse_budget(bad)


def test_the_hard_bound_is_the_token_limit_times_the_price() -> None:
    plan = plan_money(routine(max_output_tokens=50), HostCaps(), PRICES, prompt="x" * 36)
    input_tokens = 36 + FRAMING_TOKENS
    assert plan.bound_micros == input_tokens * 2 + 50 * 4
    assert plan.max_output_tokens == 50 and plan.ceilings == ()
    assert plan_money(routine(), HostCaps(), PRICES, prompt="x").bound_micros is None  # unbounded


def test_a_block_cap_bounds_the_run_and_narrows_the_output() -> None:
    input_bound = (36 + FRAMING_TOKENS) * 2  # 200
    plan = plan_money(routine(per_turn_usd=0.001), HostCaps(), PRICES, prompt="x" * 36)
    assert plan.bound_micros == 1000
    assert plan.max_output_tokens == (1000 - input_bound) // 4
    host = plan_money(routine(), HostCaps(per_run_micros=600), PRICES, prompt="x" * 36)
    assert (host.bound_micros, host.max_output_tokens) == (600, (600 - input_bound) // 4)
    tight = plan_money(routine(per_turn_usd=0.0002), HostCaps(), PRICES, prompt="x" * 36)
    assert tight.refusal == "cap_exceeded"  # the prompt alone may cost the whole cap


def test_a_warn_cap_is_no_bound_but_is_crossed() -> None:
    plan = plan_money(
        routine(per_turn_usd={"usd": 0.0005, "on_exceeded": "warn"}),
        HostCaps(per_run_micros=900),
        PRICES,
        prompt="",
    )
    assert plan.bound_micros == 900  # the host's block cap still bounds the run
    assert plan.crossed(400) == ()
    assert plan.crossed(600) == ("routine_per_run",)
    assert plan.crossed(950) == ("host_per_run", "routine_per_run")


def test_ceilings_take_the_narrower_limit_and_need_a_bound() -> None:
    host = HostCaps(routine_daily_micros=10_000, org_daily_micros=50_000)
    plan = validate_budget(routine(max_output_tokens=10, daily_usd=0.005), host, PRICES)
    assert [(c.key, c.limit_micros) for c in plan.ceilings] == [
        (Ceiling.routine_key("o", "u", "r"), 5000),
        (Ceiling.org_key("o"), 50_000),
    ]
    with pytest.raises(RegistrationRefused, match="hard per-run bound"):
        validate_budget(routine(), host, PRICES)
    with pytest.raises(RegistrationRefused, match="widens"):
        validate_budget(routine(max_output_tokens=10, daily_usd=0.02), host, PRICES)


def test_the_input_bound_counts_one_token_per_byte_plus_framing() -> None:
    plan = plan_money(routine(max_output_tokens=10, max_input_tokens=200), HostCaps(), PRICES, prompt="ignored")
    assert plan.max_input_bytes == 200 - FRAMING_TOKENS
    assert plan.bound_micros == 200 * 2 + 10 * 4
    goal = plan_money(routine(goal="é" * 10, max_output_tokens=10), HostCaps(), PRICES, prompt="é" * 10)
    assert goal.max_input_bytes == 20  # UTF-8 bytes, not characters
    assert goal.bound_micros == (20 + FRAMING_TOKENS) * 2 + 10 * 4
