"""The tick's sends: each one logged and reported, never raised (:func:`send_logged`), held for a
moment (:class:`Outbox`), and the end of the tick started before the last of them (:func:`end_of_tick`).

docs/architecture.md, section "The modules, in detail" (engine/outbox.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from alma_schedule.model import Dispatcher, RunRecord, TickEndAsk, TickEndParts, TickError
from alma_schedule.stores.fast import FastClaims

from . import collector
from .dispatch import SendsOnly

log = logging.getLogger("alma_schedule.engine")

__all__ = ["DISPATCHER", "Outbox", "end_of_tick", "send_logged"]

DISPATCHER = "<dispatcher>"

Send = Callable[[Sequence[RunRecord]], None]


def send_logged(what: str, send: Send, runs: Sequence[RunRecord]) -> TickError | None:
    """``send(runs)``; a failure is logged and returned as the tick's ``<dispatcher>`` error."""
    if not runs:
        return None
    try:
        send(runs)
    except Exception as exc:
        log.error(
            "dispatcher failed to send %d %s message(s): %s",
            len(runs),
            what,
            type(exc).__name__,
            exc_info=exc,
        )
        return TickError(DISPATCHER, f"{what}: {type(exc).__name__} ({len(runs)} not sent; re-sends recover them)")
    return None


class Outbox:
    """Sends held in order (``what``, the send, its records); thread-safe (claim batches on threads
    hold theirs). ``gc_pause`` (the ``tick_gc_pause`` setting): the sends run with the cyclic
    collector paused, as the claims' own sends do (:mod:`.collector`)."""

    def __init__(self, gc_pause: bool = False) -> None:
        self._held: list[tuple[str, Send, Sequence[RunRecord], Callable[[], None] | None]] = []
        self._lock = threading.Lock()
        self._gc_pause = gc_pause

    @property
    def pending(self) -> bool:
        return bool(self._held)

    def hold(self, what: str, send: Send, runs: Sequence[RunRecord], discard: Callable[[], None] | None = None) -> None:
        """Keep ``send(runs)`` for the next :meth:`flush` (nothing when ``runs`` is empty: then
        ``discard`` is called at once); ``discard``: what drops the send if the flush is interrupted
        before it (a staged dispatch: its producer goes back to the pool)."""
        if not runs:
            if discard is not None:
                discard()
            return
        with self._lock:
            self._held.append((what, send, runs, discard))

    def flush(self) -> list[TickError]:
        """Send everything held, in the order held (each as :func:`send_logged`); their errors. An
        exception that interrupts it (the task's time limit) drops the sends it did not reach."""
        with self._lock:
            held, self._held = self._held, []
        if not held:
            return []
        errors: list[TickError | None] = []
        reached = 0  # the sends started (one interrupted inside its send cleans up after itself)
        try:
            with collector.paused(self._gc_pause):
                for what, send, runs, _ in held:
                    reached += 1
                    errors.append(send_logged(what, send, runs))
        finally:
            for _, _, _, discard in held[reached:]:
                if discard is not None:
                    discard()
        return [e for e in errors if e is not None]


def end_of_tick(
    store: FastClaims | None, dispatcher: Dispatcher, ask: TickEndAsk, outbox: Outbox
) -> tuple[TickEndParts, list[TickError]]:
    """Flush ``outbox``; when something is held and ``dispatcher`` only publishes, start the end of
    the tick (``store.begin_tick_end(ask)``, a :class:`FastClaims` store; None: never) first, so that
    it runs meanwhile. The parts obtained
    (none when nothing started early; the tick asks for the others itself) and the send errors.
    Never raises for the early start: a store that refuses it leaves every part to the tick."""
    early = store is not None and outbox.pending and isinstance(dispatcher, SendsOnly) and dispatcher.sends_only
    with ExitStack() as stack:
        finish: Callable[[], TickEndParts] | None = None
        if early and store is not None:
            try:
                finish = stack.enter_context(store.begin_tick_end(ask))
            except Exception as exc:
                log.warning("the end of the tick did not start early: %s", type(exc).__name__, exc_info=exc)
        errors = outbox.flush()
        try:
            parts = finish() if finish is not None else TickEndParts()
        except Exception as exc:  # the store's finish never raises; if one did, the tick asks again
            log.warning("the end of the tick, started early, failed: %s", type(exc).__name__, exc_info=exc)
            parts = TickEndParts()
    return parts, errors
