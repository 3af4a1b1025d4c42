"""The governed batch runner (``kind: job``): submit a provider batch once, collect it on later ticks.
docs/architecture.md, section "The modules, in detail" (runners/governed/batch.py).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from alma_schedule.errors import ConfigurationError, OutcomeUncertain, ProviderError
from alma_schedule.model import Reason, Routine, RunHandle, RunRecord, RunResult, RunState
from alma_schedule.runners.governed.base import GovernedRunner
from alma_schedule.runners.governed.config import GovernedConfig
from alma_schedule.runners.governed.delivery import deliver_once, record_cost, uncertain_or_unsent
from alma_schedule.runners.governed.protocols import (
    BATCH_STATES,
    BatchProvider,
    BatchReceipt,
    BatchRequest,
    BatchStatus,
)

log = logging.getLogger("alma_schedule.runners.governed")

__all__ = ["GovernedBatchRunner", "create_governed_batch_runner"]

_FINAL_REASONS = {
    "failed": Reason.PROVIDER_FAILED.value,
    "expired": Reason.PROVIDER_EXPIRED.value,
    "gone": Reason.PROVIDER_GONE.value,
}


class GovernedBatchRunner(GovernedRunner):
    """A collecting :class:`~alma_schedule.model.RoutineRunner` for ``job`` routines."""

    kind = "job"

    def __init__(
        self,
        *,
        provider: BatchProvider,
        submission_deadline: timedelta,
        poll_first: timedelta | None = None,
        config: GovernedConfig,
    ) -> None:
        if not callable(getattr(provider, "submit", None)) or not callable(getattr(provider, "poll", None)):
            raise ConfigurationError("the batch provider needs submit(request) and poll(batch_id)")
        if submission_deadline <= timedelta(0):
            raise ConfigurationError("submission_deadline must be positive (every submission has a deadline)")
        if poll_first is not None and poll_first <= timedelta(0):
            raise ConfigurationError("poll_first must be positive")
        super().__init__(config)
        self.provider = provider
        self.submission_deadline = submission_deadline
        self.poll_first = poll_first

    # ------------------------------------------------------------------ run: submit once

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        prepared = self.prepare(routine, handle)
        if isinstance(prepared, RunResult):
            return prepared
        plan, fields = prepared
        request = BatchRequest(**fields)
        try:
            receipt = self.provider.submit(request)
        except Exception as exc:  # never left: failed at 0; else uncertain (a batch may be out)
            return uncertain_or_unsent(exc, handle, self.hooks, "batch submission")
        if not _usable_receipt(receipt):
            self.hooks.background_error(TypeError(f"unusable receipt {receipt!r}"), handle.key, "batch submission")
            return RunResult.failed(Reason.PROVIDER_ERROR.value, plan.bound_micros or 0, "InvalidReceipt")
        first_poll = None if self.poll_first is None else handle.now + self.poll_first
        try:
            res = handle.submit(receipt.batch_id, handle.now + self.submission_deadline, next_poll_at=first_poll)
        except Exception as exc:  # the batch is out: never finish (and release) it as a failure
            self.hooks.background_error(exc, handle.key, "recording the submission")
            raise OutcomeUncertain(f"run {handle.key}: batch submitted but not recorded") from exc
        if res.won and receipt.cost_micros:
            try:
                record_cost(handle, plan, receipt.cost_micros, self.hooks)
            except Exception as exc:  # the row is submitted: collect repairs the cost
                self.hooks.background_error(exc, handle.key, "recording the submission cost")
        return RunResult.submitted()

    # ------------------------------------------------------------------ collect: poll, repair, deliver once

    def collect(self, routine: Routine, handle: RunHandle) -> RunResult:
        record = handle.result()
        if record.state != RunState.SUBMITTED:
            return RunResult.submitted()  # someone else collects, or it is already over: write nothing
        if not record.batch_id:
            log.error("collect %s: the submitted run has no batch id", handle.key)
            return RunResult.failed(Reason.RUNNER_ERROR.value, None, "NoBatchId")
        status = self._poll(record.batch_id, handle)
        if status is not None:
            try:
                record = self._repair(routine, handle, record, status)
            except Exception as exc:  # nothing finished: the run stays submitted, polled again
                self.hooks.background_error(exc, handle.key, "recording the polled cost")
                raise OutcomeUncertain(f"run {handle.key}: polled cost not recorded") from exc
        if handle.config_changed:
            log.info("collect %s: the routine's configuration changed: not delivered", handle.key)
            return RunResult.failed(Reason.CONFIG_REVISION_CHANGED.value, record.cost_micros)
        if status is None or status.state == "pending":
            return RunResult.submitted()
        if status.state in _FINAL_REASONS:
            log.info("collect %s: batch %s is %s", handle.key, record.batch_id, status.state)
            return RunResult.failed(_FINAL_REASONS[status.state], record.cost_micros)
        if not handle.begin_collecting():
            return RunResult.submitted()  # another collector won: only it delivers
        return deliver_once(
            handle,
            text=status.text,
            sink=self.sink_for(routine),
            owner_state=RunState.COLLECTING,
            hooks=self.hooks,
            result_retention=self.result_retention,
            kind=self.kind,
        )

    def _poll(self, batch_id: str, handle: RunHandle) -> BatchStatus | None:
        """One poll; None for a transient error (logged, reported; a later tick polls again)."""
        try:
            status = self.provider.poll(batch_id)
        except ProviderError as exc:
            if exc.reason == Reason.PROVIDER_GONE.value:
                return BatchStatus("gone")
            self.hooks.background_error(exc, handle.key, "batch poll")
            return None
        except Exception as exc:
            self.hooks.background_error(exc, handle.key, "batch poll")
            return None
        if (
            not isinstance(status, BatchStatus)
            or status.state not in BATCH_STATES
            or not _money(status.cost_micros)
            or (status.state == "succeeded" and not isinstance(status.text, str))
        ):
            self.hooks.background_error(TypeError(f"unusable batch status {status!r}"), handle.key, "batch poll")
            return None
        return status

    def _repair(self, routine: Routine, handle: RunHandle, record: RunRecord, status: BatchStatus) -> RunRecord:
        """Write the provider's cost when it differs from the recorded one (never on a terminal row)."""
        if status.state == "gone" or status.cost_micros == record.cost_micros:
            return record
        if status.state == "pending" and status.cost_micros == 0:
            return record  # not known yet: keep what submission recorded
        return record_cost(handle, self.plan(routine), status.cost_micros, self.hooks, previous=record.caps_crossed)


def _money(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _usable_receipt(receipt: object) -> bool:
    return (
        isinstance(receipt, BatchReceipt)
        and isinstance(receipt.batch_id, str)
        and bool(receipt.batch_id)
        and _money(receipt.cost_micros)
    )


def create_governed_batch_runner(
    *,
    provider: BatchProvider,
    submission_deadline: timedelta = timedelta(hours=24),
    poll_first: timedelta | None = None,
    config: GovernedConfig | None = None,
    **options: Any,
) -> GovernedBatchRunner:
    """A collecting runner for ``job`` routines: the conversation runner's configuration (``config``
    or its fields as keywords), plus the mandatory ``submission_deadline`` and the first poll delay
    ``poll_first`` (default the engine's ``poll_first`` setting)."""
    return GovernedBatchRunner(
        provider=provider,
        submission_deadline=submission_deadline,
        poll_first=poll_first,
        config=config or GovernedConfig(**options),
    )
