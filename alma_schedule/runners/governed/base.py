"""The part both governed runners share: registration checks, admission (caps, then the atomic
reservation of the hard bound) and the lazily built provider request, over a :class:`GovernedConfig`.

The definition's fields and the order of admission: docs/architecture.md, section "The governed runners".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from alma_schedule.errors import RegistrationRefused
from alma_schedule.model import Reason, Routine, RunHandle, RunKey, RunResult, governed_key
from alma_schedule.runners.governed.config import GovernedConfig, PromptBuilder
from alma_schedule.runners.governed.delivery import Hooks, already_started, replayed, resolve_sink
from alma_schedule.runners.governed.money import HostCaps, MoneyPlan, Prices, goal_text, plan_money, validate_budget
from alma_schedule.runners.governed.protocols import Sink

log = logging.getLogger("alma_schedule.runners.governed")

__all__ = ["GovernedRunner", "PromptBuilder", "sink_identity"]

MAX_GOAL = 100_000


def sink_identity(name: str, sink: Sink) -> str:
    """A stable description of a sink for ``config_revision`` (its ``identity`` or its class)."""
    ident = getattr(sink, "identity", None)
    if isinstance(ident, str):
        return f"{name}={ident}"
    cls = type(sink)
    return f"{name}={cls.__module__}.{cls.__qualname__}"


class GovernedRunner:
    """Configuration and admission shared by the conversation and batch runners."""

    kind = ""

    def __init__(self, config: GovernedConfig) -> None:
        self.config = config
        self.hooks = Hooks(on_background_error=config.on_background_error, on_cap_crossed=config.on_cap_crossed)

    @property
    def sinks(self) -> Mapping[str, Sink]:
        return self.config.sinks

    @property
    def prices(self) -> Prices:
        return self.config.prices

    @property
    def host(self) -> HostCaps:
        return self.config.host

    @property
    def result_retention(self) -> timedelta | None:
        return self.config.result_retention

    @property
    def model(self) -> str | None:
        return self.config.model

    # ------------------------------------------------------------------ registration

    def validate(self, routine: Routine) -> None:
        """Refuse (``RegistrationRefused``) a routine a run could not serve: no goal, an unknown sink,
        a bad model, a budget that widens a host cap, or a ceiling without a hard per-run bound."""
        if routine.kind != self.kind:
            raise RegistrationRefused(f"this runner serves kind {self.kind!r}, not {routine.kind!r}")
        goal = routine.definition.get("goal")
        if not isinstance(goal, str) or not goal.strip():
            raise RegistrationRefused("definition.goal must be non-empty text (the prompt of each run)")
        if len(goal) > MAX_GOAL:
            raise RegistrationRefused(f"definition.goal is longer than {MAX_GOAL} characters")
        model = routine.definition.get("model")
        if model is not None and (not isinstance(model, str) or not model):
            raise RegistrationRefused("definition.model must be non-empty text")
        resolve_sink(self.sinks, routine.definition)
        validate_budget(routine, self.host, self.prices)

    def config_revision_inputs(self, routine: Routine) -> dict[str, Any]:
        """What a run depends on beyond the definition: the host's revision inputs (provider account,
        prompts, policies), prices, model, retention and the sink the routine resolves to."""
        name = routine.definition.get("sink", "default")
        sink = self.sinks.get(name) if isinstance(name, str) else None
        return {
            "kind": self.kind,
            "inputs": self.config.config_revision,
            "prices": self.prices.to_dict(),
            "model": self.model,
            "result_retention": None if self.result_retention is None else self.result_retention.total_seconds(),
            "sink": None if sink is None else sink_identity(str(name), sink),
        }

    # ------------------------------------------------------------------ admission

    def plan(self, routine: Routine) -> MoneyPlan:
        return plan_money(routine, self.host, self.prices, prompt=goal_text(routine.definition))

    def admit(self, routine: Routine, handle: RunHandle) -> MoneyPlan | RunResult:
        """Caps, then the atomic reservation of the hard bound against every ceiling.

        Returns the plan, or the ``refused`` result (nothing was spent; the engine's ``finish``
        releases whatever was reserved)."""
        plan = self.plan(routine)
        if plan.refusal is not None:
            log.info("run %s refused before the call: %s", handle.key, plan.why)
            return RunResult.refused(plan.refusal)
        if plan.ceilings:
            if plan.bound_micros is None:
                log.error("run %s: a ceiling applies but the routine has no hard per-run bound", handle.key)
                return RunResult.refused(Reason.CEILING_REACHED.value)
            res = handle.reserve(plan.bound_micros, plan.ceilings)
            if not res.ok:
                log.info("run %s refused: ceiling %s reached", handle.key, res.ceiling)
                return RunResult.refused(Reason.CEILING_REACHED.value)
        return plan

    def prompt(self, routine: Routine, key: RunKey, plan: MoneyPlan) -> str | RunResult:
        """The prompt, built lazily (after admission). A prompt longer than the input bound the
        reservation assumed is refused ``cap_exceeded`` before any call."""
        build = self.config.build_prompt
        text = goal_text(routine.definition) if build is None else build(routine, key, plan)
        if plan.bound_micros is not None and plan.max_input_bytes is not None:
            if len(text.encode("utf-8")) > plan.max_input_bytes:
                log.info("run %s refused: the prompt exceeds the input bound the reservation assumed", key)
                return RunResult.refused(Reason.CAP_EXCEEDED.value)
        return text

    def request_fields(self, routine: Routine, key: RunKey, plan: MoneyPlan, prompt: str) -> dict[str, Any]:
        model = routine.definition.get("model")
        return {
            "org": key.org,
            "uid": key.uid,
            "routine_id": key.routine_id,
            "run_id": key.run_id,
            "prompt": prompt,
            "max_cost_micros": plan.bound_micros or 0,
            "max_output_tokens": plan.max_output_tokens,
            "model": model if isinstance(model, str) else self.model,
            "custom_id": governed_key(key.scope, key.routine_id, key.run_id),
            "metadata": {"kind": self.kind},
        }

    def sink_for(self, routine: Routine) -> Sink:
        return resolve_sink(self.sinks, routine.definition)

    def prepare(self, routine: Routine, handle: RunHandle) -> tuple[MoneyPlan, dict[str, Any]] | RunResult:
        """Everything before the provider call, in order: a replayed run returns what it recorded;
        the sink is resolved (a routine whose sink is gone spends nothing); admission (caps, then the
        reservation); the request fields, built lazily; last, the run's cost written at its hard
        bound (the provider's receipt replaces it). A ``RunResult`` ends the run here."""
        record = handle.result()
        if already_started(record):
            return replayed(handle, record)
        self.sink_for(routine)
        admitted = self.admit(routine, handle)
        if isinstance(admitted, RunResult):
            return admitted
        try:
            prompt = self.prompt(routine, handle.key, admitted)
        except Exception as exc:
            self.hooks.background_error(exc, handle.key, "building the request")
            return RunResult.failed(Reason.RUNNER_ERROR.value, 0, type(exc).__name__)
        if isinstance(prompt, RunResult):
            return prompt
        fields = self.request_fields(routine, handle.key, admitted, prompt)
        if admitted.bound_micros:
            # Before the call: a run whose outcome becomes uncertain (or whose process is killed
            # in the call) already carries its whole bound as its cost, never 0.
            handle.annotate(cost_micros=admitted.bound_micros)
        return admitted, fields
