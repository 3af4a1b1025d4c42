"""A dispatch built ahead of its commit (:class:`StagedSend`): the messages of the runs a claim batch
is about to claim, built and published into the producer's open publish batch while the batch's
INSERT runs in the database, and flushed to the broker only when the tick sends them, after the
commit (``docs/architecture.md``, the dispatch).

What moves: the Python of a dispatch (the messages built by Celery's ``create_task_message``, their
``before_task_publish`` / ``after_task_publish`` signals, kombu's serialization, the grouped
``task-sent`` events) runs while the database works, instead of after the commit; nothing reaches
the broker before the commit (kombu's ``Producer.batch`` holds every operation until its flush, and
an exceptional exit discards them). What does not: the claimed runs are sent after the commit of the
batch that claimed them, exactly once per send. When the batch claimed other runs than it expected
(a fire lost to a concurrent run, a duplicate), the staged messages are discarded and the runs the
batch returned are sent as usual; a staged dispatch that is never sent is discarded (the producer
goes back to the app's pool). The signals of discarded messages have fired: a fleet that counts
``after_task_publish`` counts messages that were discarded unsent, as it already counts the ones of
a publish batch whose flush failed (sent again one at a time).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from alma_schedule.model import RunRecord

if TYPE_CHECKING:
    from alma_schedule.tasks.dispatcher import CeleryDispatcher

log = logging.getLogger(__name__)

__all__ = ["StagedSend"]

Message = tuple[list[Any], Any]


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
        dispatcher: CeleryDispatcher,
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
