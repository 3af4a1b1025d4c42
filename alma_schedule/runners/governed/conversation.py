"""The governed conversation runner (``kind: turn``): one provider turn per fire, delivered at most once.

The engine has already won ``claimed -> running``. Each step is persisted before the next:

1. admission: the narrowed caps, then the hard bound RESERVED against every ceiling (one store
   transaction); a refusal ends ``refused`` (``cap_exceeded`` / ``ceiling_reached``), nothing spent;
2. the prompt and the :class:`TurnRequest` are built lazily, only now;
3. ONE provider call, the run's cost already written at its hard bound (``prepare``).
   ``not_admitted`` / ``routing_unavailable`` end ``refused`` with zero cost and no retry (a
   repaired configuration serves the NEXT fire). An exception that proves the request never left
   (:func:`~alma_schedule.runners.governed.outcome.request_never_left`) ends
   ``failed(provider_error | provider_timeout)`` at cost 0; any other (a reset, a 5xx or 408, a
   timeout, a Celery soft time limit) is UNCERTAIN: the runner raises ``OutcomeUncertain``, the run
   stays ``running`` at its whole bound and is blocked at once (``uncertain_outcome``);
4. the receipt (session, turn, cost, caps crossed) is written in one ``annotate``; host alerts fire
   for newly crossed caps;
5. the delivery protocol of :func:`alma_schedule.runners.governed.delivery.deliver_once`: text + hash
   written, the row re-read, duplicate text suppressed, the sink attempted ONCE.

A process that dies after step 3 leaves the row ``running`` for reconciliation (``runs stuck``,
``runs record``); nothing retries it. So does a store that fails to record the receipt (step 4):
the runner raises :class:`~alma_schedule.errors.OutcomeUncertain` and the engine leaves the row
``running`` with the whole bound still reserved (the provider may have charged). A run handed to
the runner again with effects already recorded (a replay) makes no call, charge or delivery.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from alma_schedule.errors import ConfigurationError, OutcomeUncertain
from alma_schedule.model import Reason, Routine, RunHandle, RunResult, RunState
from alma_schedule.runners.governed.base import GovernedRunner, PromptBuilder
from alma_schedule.runners.governed.delivery import (
    BackgroundErrorHook,
    CapCrossedHook,
    deliver_once,
    record_cost,
    uncertain_or_unsent,
)
from alma_schedule.runners.governed.money import HostCaps, MoneyPlan, Prices
from alma_schedule.runners.governed.protocols import (
    TURN_STATUSES,
    ConversationProvider,
    Sink,
    TurnReceipt,
    TurnRequest,
)

log = logging.getLogger("alma_schedule.runners.governed")

__all__ = ["GovernedConversationRunner", "create_governed_conversation_runner"]


class GovernedConversationRunner(GovernedRunner):
    """A :class:`~alma_schedule.model.RoutineRunner` for ``turn`` routines."""

    kind = "turn"

    def __init__(self, *, provider: ConversationProvider, **config: Any) -> None:
        if not callable(getattr(provider, "run_turn", None)):
            raise ConfigurationError("the conversation provider has no run_turn(request) method")
        super().__init__(**config)
        self.provider = provider

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        prepared = self.prepare(routine, handle)
        if isinstance(prepared, RunResult):
            return prepared
        plan, fields = prepared
        sink = self.sink_for(routine)
        request = TurnRequest(**fields)
        receipt = self._call(request, handle, plan)
        if isinstance(receipt, RunResult):
            return receipt
        if receipt.status in ("not_admitted", "routing_unavailable"):
            log.info("run %s refused by the provider: %s", handle.key, receipt.status)
            return RunResult.refused(receipt.status)
        try:
            record = record_cost(
                handle,
                plan,
                receipt.cost_micros,
                self.hooks,
                session_id=receipt.session_id,
                turn_id=receipt.turn_id,
            )
        except Exception as exc:  # the provider answered (and may have charged): never finish at 0
            self.hooks.background_error(exc, handle.key, "recording the receipt")
            raise OutcomeUncertain(f"run {handle.key}: the provider answered but its receipt was not recorded") from exc
        if receipt.status == "error":
            log.warning("run %s: the provider answered error (%s)", handle.key, receipt.reason)
            return RunResult.failed(Reason.PROVIDER_ERROR.value, record.cost_micros, "ProviderErrorReceipt")
        if record.state != RunState.RUNNING:
            return RunResult.failed(Reason.RECONCILED.value, record.cost_micros)
        return deliver_once(
            handle,
            text=receipt.text,
            sink=sink,
            owner_state=RunState.RUNNING,
            hooks=self.hooks,
            result_retention=self.result_retention,
            kind=self.kind,
        )

    def _call(self, request: TurnRequest, handle: RunHandle, plan: MoneyPlan) -> TurnReceipt | RunResult:
        """The single provider call; an unusable receipt becomes a closed reason. A failure that
        proves the request never left ends at cost 0; any other (uncertain) failure raises
        :class:`OutcomeUncertain`: the run stays ``running`` at its bound, blocked at once."""
        try:
            receipt = self.provider.run_turn(request)
        except Exception as exc:  # a Celery soft time limit during the call lands here too
            return uncertain_or_unsent(exc, handle, self.hooks, "provider call")
        if (
            not isinstance(receipt, TurnReceipt)
            or receipt.status not in TURN_STATUSES
            or not _money(receipt.cost_micros)
        ):
            self.hooks.background_error(TypeError(f"unusable receipt {receipt!r}"), handle.key, "provider call")
            return RunResult.failed(Reason.PROVIDER_ERROR.value, plan.bound_micros or 0, "InvalidReceipt")
        if receipt.status == "ok" and not isinstance(receipt.text, str):
            self.hooks.background_error(TypeError("receipt text is not text"), handle.key, "provider call")
            return RunResult.failed(Reason.PROVIDER_ERROR.value, receipt.cost_micros, "InvalidReceipt")
        return receipt


def _money(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def create_governed_conversation_runner(
    *,
    provider: ConversationProvider,
    sinks: Mapping[str, Sink] | Sink,
    prices: Prices | None = None,
    host: HostCaps | None = None,
    result_retention: timedelta | None = None,
    config_revision: Mapping[str, Any] | None = None,
    on_background_error: BackgroundErrorHook | None = None,
    on_cap_crossed: CapCrossedHook | None = None,
    build_prompt: PromptBuilder | None = None,
    model: str | None = None,
) -> GovernedConversationRunner:
    """A runner for ``turn`` routines. Pass it to ``create_schedule`` (or register it for kind ``turn``).

    ``sinks`` maps names to sinks (a routine picks one with ``definition["sink"]``, default
    ``"default"``); a single sink is the default one. ``host`` holds the host caps and ``prices``
    the token prices that turn ``max_output_tokens`` into a hard bound. ``config_revision`` is what
    the routine's ``config_revision`` must cover beyond its definition (provider account, prompts,
    policies). ``build_prompt(routine, key, plan)`` loads context lazily, after every reservation
    (give the budget a ``max_input_tokens`` when it adds to the goal). ``on_background_error(exc,
    key)`` receives raw provider and sink errors; ``on_cap_crossed(key, cap, cost, limit)`` one
    alert per (scope, run, cap).
    """
    return GovernedConversationRunner(
        provider=provider,
        sinks=_sinks(sinks),
        prices=prices,
        host=host,
        result_retention=result_retention,
        config_revision=config_revision,
        on_background_error=on_background_error,
        on_cap_crossed=on_cap_crossed,
        build_prompt=build_prompt,
        model=model,
    )


def _sinks(sinks: Mapping[str, Sink] | Sink) -> Mapping[str, Sink]:
    if isinstance(sinks, Mapping):
        return sinks
    return {"default": sinks}
