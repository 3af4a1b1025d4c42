"""The governed conversation runner (``kind: turn``): one provider turn per fire, delivered at most once.

Admission, the lazy request, one call (an uncertain outcome raises ``OutcomeUncertain``), the
receipt, then the delivery protocol: docs/architecture.md, section "The governed runners".
"""

from __future__ import annotations

import logging
from typing import Any

from alma_schedule.errors import ConfigurationError, OutcomeUncertain
from alma_schedule.model import Reason, Routine, RunHandle, RunResult, RunState
from alma_schedule.runners.governed.base import GovernedRunner
from alma_schedule.runners.governed.config import GovernedConfig
from alma_schedule.runners.governed.delivery import deliver_once, record_cost, uncertain_or_unsent
from alma_schedule.runners.governed.money import MoneyPlan
from alma_schedule.runners.governed.protocols import TURN_STATUSES, ConversationProvider, TurnReceipt, TurnRequest

log = logging.getLogger("alma_schedule.runners.governed")

__all__ = ["GovernedConversationRunner", "create_governed_conversation_runner"]


class GovernedConversationRunner(GovernedRunner):
    """A :class:`~alma_schedule.model.RoutineRunner` for ``turn`` routines."""

    kind = "turn"

    def __init__(self, *, provider: ConversationProvider, config: GovernedConfig) -> None:
        if not callable(getattr(provider, "run_turn", None)):
            raise ConfigurationError("the conversation provider has no run_turn(request) method")
        super().__init__(config)
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
    *, provider: ConversationProvider, config: GovernedConfig | None = None, **options: Any
) -> GovernedConversationRunner:
    """A runner for ``turn`` routines. Pass it to ``create_scheduler`` (or register it for kind ``turn``).

    Its configuration is ``config`` or, as keywords, the fields of
    :class:`~alma_schedule.runners.governed.config.GovernedConfig` (``sinks`` required; one sink is
    the ``default`` one).
    """
    return GovernedConversationRunner(provider=provider, config=config or GovernedConfig(**options))
