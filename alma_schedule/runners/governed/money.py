"""Money of a governed run: host caps, a routine's narrowed budget, the hard bound, ceilings, crossings.

docs/architecture.md, section "The modules, in detail" (runners/governed/money.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from alma_schedule.errors import RegistrationRefused
from alma_schedule.model import Ceiling, Routine, RoutineKey
from alma_schedule.model.money import MAX_STORABLE_USD, usd_micros
from alma_schedule.settings import Settings

MICROS_PER_USD = 1_000_000
TOKENS_PER_MTOK = 1_000_000
#: Tokens a chat request may add around the prompt (roles, separators, a short system line).
FRAMING_TOKENS = 64

HOST_PER_RUN = "host_per_run"
ROUTINE_PER_RUN = "routine_per_run"
HARD_BOUND = "hard_bound"

_BUDGET_KEYS = frozenset({"per_turn_usd", "per_run_usd", "daily_usd", "max_output_tokens", "max_input_tokens"})
_POLICIES = frozenset({"warn", "block"})


@dataclass(frozen=True, slots=True)
class HostCaps:
    """The host's caps (0 = none). ``per_run_micros`` always blocks."""

    per_run_micros: int = 0
    routine_daily_micros: int = 0
    org_daily_micros: int = 0

    @classmethod
    def from_settings(cls, s: Settings) -> HostCaps:
        return cls(s.cap_per_run_micros, s.ceiling_routine_daily_micros, s.ceiling_org_daily_micros)

    def to_dict(self) -> dict[str, int]:
        return {
            "per_run_micros": self.per_run_micros,
            "routine_daily_micros": self.routine_daily_micros,
            "org_daily_micros": self.org_daily_micros,
        }


@dataclass(frozen=True, slots=True)
class Prices:
    """Micro-USD per million tokens."""

    input_per_mtok_micros: int = 0
    output_per_mtok_micros: int = 0

    @classmethod
    def from_settings(cls, s: Settings) -> Prices:
        return cls(s.price_input_per_mtok_micros, s.price_output_per_mtok_micros)

    def input_cost(self, tokens: int) -> int:
        return math.ceil(tokens * self.input_per_mtok_micros / TOKENS_PER_MTOK)

    def output_cost(self, tokens: int) -> int:
        return math.ceil(tokens * self.output_per_mtok_micros / TOKENS_PER_MTOK)

    def to_dict(self) -> dict[str, int]:
        return {
            "input_per_mtok_micros": self.input_per_mtok_micros,
            "output_per_mtok_micros": self.output_per_mtok_micros,
        }


@dataclass(frozen=True, slots=True)
class Budget:
    """A routine's parsed ``budget`` (every field optional)."""

    per_run_micros: int | None = None
    per_run_policy: str = "block"
    daily_micros: int | None = None
    max_output_tokens: int | None = None
    max_input_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class RunCap:
    """One per-run cap: its name (what ``caps_crossed`` holds), limit and policy."""

    name: str
    limit_micros: int
    policy: str  # "warn" | "block"


@dataclass(frozen=True, slots=True)
class MoneyPlan:
    """What one run may spend: its caps, hard bound, ceilings and token limits.

    ``refusal`` is a closed reason code when the run must be refused before any call.
    """

    caps: tuple[RunCap, ...]
    bound_micros: int | None
    ceilings: tuple[Ceiling, ...]
    max_output_tokens: int | None
    max_input_bytes: int | None
    refusal: str | None = None
    why: str = ""

    def crossed(self, cost_micros: int) -> tuple[str, ...]:
        """The names of the caps ``cost_micros`` crosses (a cost above the hard bound too)."""
        names = [c.name for c in self.caps if cost_micros > c.limit_micros]
        if self.bound_micros is not None and cost_micros > self.bound_micros and not names:
            names.append(HARD_BOUND)
        return tuple(names)


def usd_to_micros(name: str, value: object) -> int:
    """``0.5`` -> ``500000`` in exact decimal arithmetic: :func:`alma_schedule.model.money.usd_micros`
    (every bound checked before any conversion) up to what a store can hold, any decimal literal
    read (``plain=False``: a row 0.1.0 stored keeps running). Registration checks the plain form
    and ``max_cap_usd`` first (``engine.limits``); a stored row above that keeps running."""
    return usd_micros(name, value, max_usd=MAX_STORABLE_USD, setting="what a store can hold", plain=False)


def _tokens(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RegistrationRefused(f"budget.{name}: expected a positive integer, got {value!r}")
    return value


def parse_budget(definition: Mapping[str, Any]) -> Budget:
    """Parse ``definition["budget"]``; :class:`RegistrationRefused` names the bad field."""
    raw = definition.get("budget")
    if raw is None:
        return Budget()
    if not isinstance(raw, Mapping):
        raise RegistrationRefused("budget must be an object")
    unknown = sorted(set(raw) - _BUDGET_KEYS)
    if unknown:
        raise RegistrationRefused(f"budget has unknown fields: {', '.join(unknown)}")
    if "per_turn_usd" in raw and "per_run_usd" in raw:
        raise RegistrationRefused("budget: give per_turn_usd or per_run_usd, not both")
    per_key = "per_turn_usd" if "per_turn_usd" in raw else "per_run_usd"
    per_run, policy = None, "block"
    if per_key in raw:
        per_run, policy = _cap(per_key, raw[per_key], policies=_POLICIES)
    daily = None
    if "daily_usd" in raw:
        daily, _ = _cap("daily_usd", raw["daily_usd"], policies=frozenset({"block"}))
    out_tokens = _tokens("max_output_tokens", raw["max_output_tokens"]) if "max_output_tokens" in raw else None
    in_tokens = _tokens("max_input_tokens", raw["max_input_tokens"]) if "max_input_tokens" in raw else None
    return Budget(per_run, policy, daily, out_tokens, in_tokens)


def _cap(name: str, value: object, *, policies: frozenset[str]) -> tuple[int, str]:
    if isinstance(value, Mapping):
        extra = sorted(set(value) - {"usd", "on_exceeded"})
        if extra or "usd" not in value:
            raise RegistrationRefused(f"budget.{name} must be {{'usd': amount, 'on_exceeded': ...}}")
        policy = value.get("on_exceeded", "block")
        if policy not in policies:
            raise RegistrationRefused(
                f"budget.{name}.on_exceeded must be one of {', '.join(sorted(policies))}, got {policy!r}"
            )
        return usd_to_micros(name, value["usd"]), str(policy)
    return usd_to_micros(name, value), "block"


def validate_budget(routine: Routine, host: HostCaps, prices: Prices) -> MoneyPlan:
    """Registration check: the budget parses, narrows the host (never widens), and every ceiling has
    a hard bound that fits under it. Raises :class:`RegistrationRefused`; returns the plan."""
    budget = parse_budget(routine.definition)
    if budget.per_run_micros is not None and host.per_run_micros and budget.per_run_micros > host.per_run_micros:
        raise RegistrationRefused(
            f"budget per-run cap {budget.per_run_micros} micro-USD widens the host cap "
            f"({host.per_run_micros}, ALMA_CAP_PER_RUN_MICROS): a routine may only narrow it"
        )
    if (
        budget.daily_micros is not None
        and host.routine_daily_micros
        and budget.daily_micros > host.routine_daily_micros
    ):
        raise RegistrationRefused(
            f"budget.daily_usd {budget.daily_micros} micro-USD widens the host routine ceiling "
            f"({host.routine_daily_micros}, ALMA_CEILING_ROUTINE_DAILY_MICROS)"
        )
    plan = plan_money(routine, host, prices, prompt=goal_text(routine.definition))
    if plan.ceilings and plan.bound_micros is None:
        raise RegistrationRefused(
            "a daily ceiling needs a hard per-run bound: set budget.max_output_tokens, a blocking "
            "budget.per_turn_usd, or ALMA_CAP_PER_RUN_MICROS"
        )
    if plan.refusal is not None:
        raise RegistrationRefused(plan.why)
    for ceiling in plan.ceilings:
        if plan.bound_micros is not None and plan.bound_micros > ceiling.limit_micros:
            raise RegistrationRefused(
                f"the per-run bound ({plan.bound_micros} micro-USD) exceeds the daily ceiling "
                f"{ceiling.key} ({ceiling.limit_micros}): no run could ever be admitted"
            )
    return plan


def goal_text(definition: Mapping[str, Any]) -> str:
    goal = definition.get("goal")
    return goal if isinstance(goal, str) else ""


def ceilings_for(key: RoutineKey, host: HostCaps, budget: Budget) -> tuple[Ceiling, ...]:
    """The daily ceilings a run of ``key`` falls under (routine: the narrower of host and budget),
    keyed by :meth:`Ceiling.routine_key` / :meth:`Ceiling.org_key` (fixed length whatever the ids)."""
    limits = [v for v in (host.routine_daily_micros, budget.daily_micros) if v]
    out: list[Ceiling] = []
    if limits:
        out.append(Ceiling(Ceiling.routine_key(key.org, key.uid, key.routine_id), min(limits)))
    if host.org_daily_micros:
        out.append(Ceiling(Ceiling.org_key(key.org), host.org_daily_micros))
    return tuple(out)


def plan_money(routine: Routine, host: HostCaps, prices: Prices, *, prompt: str) -> MoneyPlan:
    """The money plan of one run of ``routine`` whose prompt is ``prompt``. Pure; never raises for a
    budget :func:`validate_budget` accepted (a refusal is returned in ``refusal``)."""
    budget = parse_budget(routine.definition)
    caps: list[RunCap] = []
    if host.per_run_micros:
        caps.append(RunCap(HOST_PER_RUN, host.per_run_micros, "block"))
    if budget.per_run_micros is not None:
        caps.append(RunCap(ROUTINE_PER_RUN, budget.per_run_micros, budget.per_run_policy))
    blocks = [c.limit_micros for c in caps if c.policy == "block"]

    in_tokens = budget.max_input_tokens
    if in_tokens is None:
        in_tokens = len(prompt.encode("utf-8")) + FRAMING_TOKENS
    max_input_bytes = max(0, in_tokens - FRAMING_TOKENS)  # bytes >= tokens: this many bytes fit
    input_bound = prices.input_cost(in_tokens)

    out_tokens = budget.max_output_tokens
    bound: int | None = None
    refusal: str | None = None
    why = ""
    if blocks:
        block = min(blocks)
        room = block - input_bound
        if room <= 0 or (prices.output_per_mtok_micros and prices.output_cost(1) > room):
            refusal = "cap_exceeded"
            why = (
                f"the prompt alone may cost {input_bound} micro-USD, which leaves no room under the "
                f"blocking per-run cap of {block}"
            )
        elif prices.output_per_mtok_micros:
            affordable = room * TOKENS_PER_MTOK // prices.output_per_mtok_micros
            out_tokens = affordable if out_tokens is None else min(out_tokens, affordable)
        bound = block
    if out_tokens is not None:
        token_bound = input_bound + prices.output_cost(out_tokens)
        bound = token_bound if bound is None else min(bound, token_bound)
    return MoneyPlan(
        caps=tuple(caps),
        bound_micros=bound,
        ceilings=ceilings_for(routine.key, host, budget),
        max_output_tokens=out_tokens,
        max_input_bytes=max_input_bytes,
        refusal=refusal,
        why=why,
    )
