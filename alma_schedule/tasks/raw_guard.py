"""Raw bytes on a queue a worker of ours serves: dead-lettered as they came, and the worker goes on.

docs/architecture.md, section "The modules, in detail" (tasks/raw_guard.py).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from celery import bootsteps

from alma_schedule.compat.kombu import guarded_connection
from alma_schedule.tasks.bootstep import KindCheckStep, consumed_queues
from alma_schedule.tasks.composition import composition_of, our_queue_names
from alma_schedule.tasks.dead_letter import count_refused, publish_dead

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.tasks.composition import Composition

log = logging.getLogger(__name__)

RAW_CONTENT_TYPE = "application/octet-stream"


def _short(raw: bytes, limit: int = 120) -> str:
    text = repr(raw)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def refuse_raw(app: Celery, dead: str, raw: bytes, queue: str, reason: str) -> None:
    """Count, log and dead-letter the raw item ``raw`` of ``queue`` (see the module docstring)."""
    count_refused(queue)
    log.warning(
        "alma_schedule: refused a message on %s (raw bytes): %s; bytes %s; dead-lettered to %s",
        queue,
        reason,
        _short(raw),
        dead,
    )
    headers = {"x-alma-queue": queue, "x-alma-refused": reason, "x-alma-raw": True, "x-alma-headers": None}
    try:
        publish_dead(app, dead, raw, headers, RAW_CONTENT_TYPE, "binary")
    except Exception as exc:  # the broker is down: the line above is all that is left of it
        log.error("alma_schedule: could not dead-letter the raw item to %s: %r", dead, exc)


def guard_broker(composition: Composition, queues: set[str]) -> bool:
    """Make the app's broker connections guarded when ``queues`` hold one of ours; returns whether
    they are. Reads ``dead_queue`` (validated: the start-up check ran before)."""
    if not set(our_queue_names(composition).values()) & queues:
        return False
    amqp = composition.app.amqp
    if getattr(amqp.Connection, "alma_refuse", None) is None:
        refuse = partial(refuse_raw, composition.app, composition.settings.dead_queue)
        amqp.Connection = guarded_connection(amqp.Connection, refuse)
    return True


class RawGuardStep(bootsteps.Step):
    """Worker bootstep running :func:`guard_broker` (before the consumer connects: bootsteps are all
    built before any of them starts)."""

    name = "alma_schedule.raw_guard"
    label = "alma_schedule raw bytes guard"
    requires = (KindCheckStep,)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        composition = composition_of(parent.app)
        if composition is not None:
            guard_broker(composition, consumed_queues(parent) or set())


__all__ = ["RAW_CONTENT_TYPE", "RawGuardStep", "guard_broker", "refuse_raw"]
