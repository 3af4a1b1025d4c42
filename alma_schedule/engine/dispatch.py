"""``InProcessDispatcher``: the embedded mode's dispatcher (the demo, tests, ``tick --in-process``);
and the optional abilities a dispatcher may declare (:class:`StagesRuns`, :class:`SpreadsContext`,
:class:`SendsOnly`), which the tick checks with ``isinstance`` (docs/architecture.md, the dispatch).
docs/architecture.md, section "The modules, in detail" (engine/dispatch.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol, runtime_checkable

from alma_schedule.model import RunKey, RunRecord

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Executor", "InProcessDispatcher", "SendsOnly", "SpreadsContext", "Staged", "StagesRuns"]


class Staged(Protocol):
    """A batch's messages built ahead of its commit (:class:`~alma_schedule.tasks.staged.StagedSend`)."""

    def matches(self, runs: Sequence[RunRecord]) -> bool: ...
    def send(self, runs: Sequence[RunRecord]) -> None: ...
    def discard(self) -> None: ...


@runtime_checkable
class StagesRuns(Protocol):
    """Builds a claim batch's messages while its INSERT runs, published only when sent."""

    def stage_runs(self, runs: Sequence[RunRecord]) -> Staged | None: ...


@runtime_checkable
class SpreadsContext(Protocol):
    """Sends from the tick's claim threads in the calling thread's context (its Celery task)."""

    def caller_context(self) -> Callable[[], AbstractContextManager[None]]: ...


@runtime_checkable
class SendsOnly(Protocol):
    """``sends_only`` true: it only publishes (nothing it is sent runs before it returns)."""

    sends_only: bool


class Executor(Protocol):
    """What the dispatcher calls: the engine's ``execute`` and ``collect`` (a :class:`Scheduler`)."""

    def execute(self, key: RunKey, *, now: datetime | None = None) -> RunRecord: ...

    def collect(self, key: RunKey, *, now: datetime | None = None) -> RunRecord: ...


class InProcessDispatcher:
    """Executes runs and collects in-process. Bound to its :class:`Scheduler` by ``create_schedule``."""

    def __init__(self, schedule: Executor | None = None, *, keep_failures: int = 100) -> None:
        self._schedule = schedule
        self._lock = threading.Lock()
        self._keep = keep_failures
        self.failures: list[tuple[RunKey, str]] = []

    def bind(self, schedule: Executor) -> None:
        """Attach the schedule whose ``execute`` / ``collect`` this dispatcher calls."""
        self._schedule = schedule

    @property
    def bound(self) -> bool:
        return self._schedule is not None

    def _each(self, runs: Sequence[RunRecord], call: Callable[[RunKey], object], what: str) -> None:
        for record in runs:
            key = record.key
            try:
                call(key)
            except Exception as exc:
                log.error("in-process %s of %s raised %s", what, key, type(exc).__name__, exc_info=exc)
                with self._lock:
                    self.failures.append((key, type(exc).__name__))
                    del self.failures[: -self._keep]

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        schedule = self._require()
        self._each(runs, lambda key: schedule.execute(key), "run")

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        schedule = self._require()
        self._each(runs, lambda key: schedule.collect(key), "collect")

    def run_queue_depth(self) -> int | None:
        return 0

    def _require(self) -> Executor:
        if self._schedule is None:
            raise RuntimeError("InProcessDispatcher is not bound to a Scheduler (use create_schedule)")
        return self._schedule
