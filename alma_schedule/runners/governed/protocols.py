"""The three doors of the governed runners: a conversation provider, a batch provider, a sink.

docs/architecture.md, section "The modules, in detail" (runners/governed/protocols.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from alma_schedule.model import Data, RunKey, Scope, governed_key

TurnStatus = Literal["ok", "not_admitted", "routing_unavailable", "error"]
BatchState = Literal["pending", "succeeded", "failed", "expired", "gone"]

TURN_STATUSES: frozenset[str] = frozenset({"ok", "not_admitted", "routing_unavailable", "error"})
BATCH_STATES: frozenset[str] = frozenset({"pending", "succeeded", "failed", "expired", "gone"})


# --------------------------------------------------------------------------- conversation


@dataclass(frozen=True, slots=True)
class TurnRequest(Data):
    """One conversation turn, built lazily by the runner only after every reservation.

    ``max_cost_micros`` is the hard bound the runner reserved (0 = no bound); a provider that can
    enforce a budget must not spend beyond it. ``custom_id`` is the fire's governed key: a provider
    that supports idempotency keys should send it.
    """

    org: str
    uid: str
    routine_id: str
    run_id: str
    prompt: str
    max_cost_micros: int = 0
    max_output_tokens: int | None = None
    model: str | None = None
    custom_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> RunKey:
        return RunKey(self.org, self.uid, self.routine_id, self.run_id)


@dataclass(frozen=True, slots=True)
class TurnReceipt(Data):
    """A provider's answer to one turn.

    docs/architecture.md, "The modules, in detail" (runners/governed/protocols.py, TurnReceipt).
    """

    status: TurnStatus
    text: str = ""
    cost_micros: int = 0
    session_id: str | None = None
    turn_id: str | None = None
    reason: str | None = None


@runtime_checkable
class ConversationProvider(Protocol):
    def run_turn(self, request: TurnRequest) -> TurnReceipt:
        """Run one turn. May raise :class:`~alma_schedule.errors.ProviderError`."""
        ...


# --------------------------------------------------------------------------- batch


@dataclass(frozen=True, slots=True)
class BatchRequest(Data):
    """One background job. ``custom_id`` is the fire's governed key (the provider's custom id)."""

    org: str
    uid: str
    routine_id: str
    run_id: str
    prompt: str
    custom_id: str
    max_cost_micros: int = 0
    max_output_tokens: int | None = None
    model: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> RunKey:
        return RunKey(self.org, self.uid, self.routine_id, self.run_id)


@dataclass(frozen=True, slots=True)
class BatchReceipt(Data):
    """A submitted job: the provider's batch id (and any cost charged at submission)."""

    batch_id: str
    cost_micros: int = 0


@dataclass(frozen=True, slots=True)
class BatchStatus(Data):
    """One poll's answer. ``pending`` (poll again later), ``succeeded`` (text and cost),
    ``failed`` / ``expired`` (the provider gave up; cost may be non-zero), ``gone`` (the provider no
    longer knows the batch, e.g. HTTP 404). ``cost_micros`` may revise what an earlier poll said."""

    state: BatchState
    text: str = ""
    cost_micros: int = 0
    reason: str | None = None


@runtime_checkable
class BatchProvider(Protocol):
    def submit(self, request: BatchRequest) -> BatchReceipt:
        """Submit once. May raise :class:`~alma_schedule.errors.ProviderError`."""
        ...

    def poll(self, batch_id: str) -> BatchStatus:
        """Read the job's status. May raise :class:`~alma_schedule.errors.ProviderError`
        (``provider_gone`` is the same as returning ``BatchStatus('gone')``)."""
        ...


# --------------------------------------------------------------------------- delivery


@dataclass(frozen=True, slots=True)
class Delivery(Data):
    """What a sink receives, once per fire at most. ``idempotency_key`` is
    ``governed_key(scope, routine_id, run_id)``: a destination that dedupes by it is safe even
    across an operator's manual re-send."""

    org: str
    uid: str
    routine_id: str
    run_id: str
    text: str
    cost_micros: int
    caps_crossed: tuple[str, ...]
    idempotency_key: str
    kind: str = ""

    @classmethod
    def for_run(
        cls, key: RunKey, text: str, cost_micros: int, caps_crossed: tuple[str, ...], kind: str = ""
    ) -> Delivery:
        return cls(
            org=key.org,
            uid=key.uid,
            routine_id=key.routine_id,
            run_id=key.run_id,
            text=text,
            cost_micros=cost_micros,
            caps_crossed=tuple(caps_crossed),
            idempotency_key=governed_key(Scope(key.org, key.uid), key.routine_id, key.run_id),
            kind=kind,
        )


@runtime_checkable
class Sink(Protocol):
    def deliver(self, delivery: Delivery) -> None:
        """Deliver once; raise on failure (the runner records ``failed(sink_error)``, no retry)."""
        ...
