"""Where scrypt runs in serve-http: :data:`GATE`, at most :data:`WORKERS` computations at once on
threads of its own; at most :data:`MAX_WAITING` wait, one more is refused (:class:`GateFull`: 429).

docs/architecture.md, section "The modules, in detail" (dashboard/scrypt_gate.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["GATE", "MAX_WAITING", "WORKERS", "GateFull", "ScryptGate"]

T = TypeVar("T")

WORKERS = 2
MAX_WAITING = 64
THREAD_PREFIX = "alma-scrypt"


class GateFull(Exception):
    """More than ``MAX_WAITING`` computations already wait for a turn."""


class ScryptGate:
    """A bounded executor of password checks, counting how many run at once."""

    def __init__(self, workers: int = WORKERS, max_waiting: int = MAX_WAITING) -> None:
        self.workers, self.max_waiting = workers, max_waiting
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.waiting = 0
        self.running = 0
        self.peak = 0
        self.computed = 0
        self.threads: set[str] = set()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=THREAD_PREFIX)
            return self._pool

    def reset_counts(self) -> None:
        """Start ``peak``, ``computed`` and ``threads`` again (a test or a benchmark run)."""
        with self._lock:
            self.peak, self.computed = self.running, 0
            self.threads = set()

    async def run(self, check: Callable[[], T]) -> T:
        """``check()`` on the gate's threads (raises :class:`GateFull` when too many wait)."""
        with self._lock:
            if self.waiting >= self.max_waiting:
                raise GateFull
            self.waiting += 1

        def counted() -> T:
            with self._lock:
                self.waiting -= 1
                self.running += 1
                self.peak = max(self.peak, self.running)
                self.threads.add(threading.current_thread().name)
            try:
                return check()
            finally:
                with self._lock:
                    self.running -= 1
                    self.computed += 1

        try:
            future: Future[T] = self._executor().submit(counted)
        except BaseException:
            with self._lock:
                self.waiting -= 1
            raise
        future.add_done_callback(self._never_started)
        return await asyncio.wrap_future(future)

    def _never_started(self, future: Future[Any]) -> None:
        if future.cancelled():  # cancelled while it waited: counted() never ran
            with self._lock:
                self.waiting -= 1


#: The process's gate (module level: every app of the process shares the bound).
GATE = ScryptGate()
