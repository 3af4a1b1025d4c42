"""``ScriptedProvider``: a deterministic conversation and batch provider for the demo and for tests.

docs/architecture.md, section "The modules, in detail" (runners/governed/scripted.py).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from alma_schedule.runners.governed.money import Prices
from alma_schedule.runners.governed.protocols import BatchReceipt, BatchRequest, BatchStatus, TurnReceipt, TurnRequest

__all__ = ["ScriptedProvider"]

BATCH_PREFIX = "scripted-"


class ScriptedProvider:
    """Implements :class:`ConversationProvider` and :class:`BatchProvider`. Thread-safe."""

    def __init__(
        self,
        *,
        turns: Iterable[TurnReceipt | BaseException] = (),
        submits: Iterable[BatchReceipt | BaseException] = (),
        polls: Iterable[BatchStatus | BaseException] = (),
        prices: Prices | None = None,
    ) -> None:
        self._turns: deque[TurnReceipt | BaseException] = deque(turns)
        self._submits: deque[BatchReceipt | BaseException] = deque(submits)
        self._polls: deque[BatchStatus | BaseException] = deque(polls)
        self.prices = prices or Prices()
        self.calls: list[tuple[str, Any]] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "ScriptedProvider()"

    @property
    def identity(self) -> str:
        return "scripted"

    def _next(self, name: str, arg: Any, script: deque[Any]) -> Any:
        with self._lock:
            self.calls.append((name, arg))
            item = script.popleft() if script else None
        if isinstance(item, BaseException):
            raise item
        return item

    def count(self, name: str) -> int:
        """How many calls of ``name`` (``run_turn``, ``submit``, ``poll``) this instance received."""
        with self._lock:
            return sum(1 for called, _ in self.calls if called == name)

    def _cost(self, prompt: str, text: str, cap: int) -> int:
        cost = self.prices.input_cost(len(prompt.encode())) + self.prices.output_cost(len(text.encode()))
        return min(cost, cap) if cap > 0 else cost

    # ------------------------------------------------------------------ ConversationProvider

    def run_turn(self, request: TurnRequest) -> TurnReceipt:
        scripted = self._next("run_turn", request, self._turns)
        if scripted is not None:
            return scripted  # type: ignore[no-any-return]
        text = f"{request.prompt}\n\n(scripted answer for {request.run_id})"
        return TurnReceipt(
            status="ok",
            text=text,
            cost_micros=self._cost(request.prompt, text, request.max_cost_micros),
            session_id=f"scripted-session-{request.custom_id[:16]}",
            turn_id=f"scripted-turn-{request.custom_id[:16]}",
        )

    # ------------------------------------------------------------------ BatchProvider

    def submit(self, request: BatchRequest) -> BatchReceipt:
        scripted = self._next("submit", request, self._submits)
        if scripted is not None:
            return scripted  # type: ignore[no-any-return]
        return BatchReceipt(batch_id=BATCH_PREFIX + request.custom_id)

    def poll(self, batch_id: str) -> BatchStatus:
        scripted = self._next("poll", batch_id, self._polls)
        if scripted is not None:
            return scripted  # type: ignore[no-any-return]
        text = f"scripted result of batch {batch_id}"
        return BatchStatus(state="succeeded", text=text, cost_micros=self._cost("", text, 0))
