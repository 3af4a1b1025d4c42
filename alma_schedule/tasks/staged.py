"""A dispatch built ahead of its commit (:class:`StagedSend`): a claim batch's messages, published
into an open publish batch while its INSERT runs, flushed to the broker only after the commit.
docs/architecture.md, section "The modules, in detail" (tasks/staged.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any, Protocol

from alma_schedule.model import RunRecord

log = logging.getLogger(__name__)

__all__ = ["Resender", "StagedSend"]

Message = tuple[list[Any], Any]


class Resender(Protocol):
    """How a staged send falls back (:class:`~alma_schedule.tasks.dispatcher.CeleryDispatcher`)."""

    def send_runs(self, runs: Sequence[RunRecord]) -> None: ...
    def publish_each(self, name: str, messages: list[Message]) -> None: ...


class _Discarded(Exception):
    """Thrown into the open publish batch to discard what it holds (kombu discards on an exceptional exit)."""


class StagedSend:
    """The messages of ``runs`` (``name`` messages, built as ``CeleryDispatcher.send_runs`` builds
    them) published into the open publish batch that ``stack`` holds (with its producer), not yet
    flushed. :meth:`send` with the same runs (the same records, in order) flushes them (one round
    trip); with any other runs, discards them and sends those instead. :meth:`discard` drops them.
    Each happens once (a second call sends as the dispatcher would, or does nothing); thread-safe."""

    def __init__(
        self,
        dispatcher: Resender,
        runs: Sequence[RunRecord],
        name: str,
        messages: list[Message],
        stack: ExitStack,
    ) -> None:
        self._dispatcher, self._runs, self._name, self._messages = dispatcher, tuple(runs), name, messages
        self._stack: ExitStack | None = stack
        self._lock = threading.Lock()

    def matches(self, runs: Sequence[RunRecord]) -> bool:
        """``runs`` are the staged ones: the same records (not equal ones), in the same order."""
        staged = self._runs
        return len(runs) == len(staged) and all(a is b for a, b in zip(runs, staged, strict=True))

    def send(self, runs: Sequence[RunRecord]) -> None:
        """Send ``runs``: the staged messages flushed when they are the staged runs (a flush that
        fails is sent again one message at a time with kombu's publish retry, as any dispatch),
        else as ``send_runs`` would. Raises :class:`DispatchError` as ``send_runs`` does."""
        stack = self._take()
        if stack is None or not self.matches(runs):
            if stack is not None:
                _discard(stack)
            self._dispatcher.send_runs(runs)
            return
        try:
            stack.close()  # the publish batch's flush: every message and event in one round trip
            return
        except Exception as exc:
            log.warning(
                "sent %d staged %s messages, uncertain: %s; sending them again one at a time, with the publish retry",
                len(self._messages), self._name, type(exc).__name__,
            )  # fmt: skip
        self._dispatcher.publish_each(self._name, self._messages)

    def discard(self) -> None:
        """Drop the staged messages (nothing reaches the broker); the producer goes back to the pool."""
        stack = self._take()
        if stack is not None:
            _discard(stack)

    @property
    def pending(self) -> bool:
        """Neither sent nor discarded yet."""
        with self._lock:
            return self._stack is not None

    def _take(self) -> ExitStack | None:
        with self._lock:
            stack, self._stack = self._stack, None
        return stack


def _discard(stack: ExitStack) -> None:
    try:
        stack.__exit__(_Discarded, _Discarded(), None)
    except Exception as exc:  # releasing the producer failed: nothing was sent, nothing to undo
        log.warning("discarding staged messages: %s", type(exc).__name__, exc_info=exc)
