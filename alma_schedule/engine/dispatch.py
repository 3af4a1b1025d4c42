"""``InProcessDispatcher``: the embedded mode's dispatcher (the demo, tests, ``tick --in-process``).

It runs each claimed fire (``execute``) and each poll (``collect``) in the calling thread, right
after the tick's commit, at the settings clock (as a worker would). One message's failure is logged
and kept in :attr:`InProcessDispatcher.failures`; the others still run. Nothing waits in a queue, so
``run_queue_depth`` is 0.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from alma_schedule.model import RunKey, RunRecord

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Executor", "InProcessDispatcher"]


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
