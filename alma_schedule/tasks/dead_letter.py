"""What happens to a refused message of our queues: one warning line, a count, a copy on ``alma.dead``.
docs/architecture.md, section "The modules, in detail" (tasks/dead_letter.py).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

from celery import bootsteps
from celery.exceptions import InvalidTaskError
from celery.signals import task_rejected

from alma_schedule.tasks.composition import composition_of
from alma_schedule.tasks.only_ours import OnlyOurs, our_queue, queue_among

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger(__name__)
#: Celery's consumer logger (the one its own ``reject_log_error`` calls use).
logger = logging.getLogger("celery.worker.consumer.consumer")

_lock = threading.Lock()
_refused: Counter[str] = Counter()


def refused_total(queue: str | None = None) -> int:
    """Messages refused by this process since it started (on ``queue``, or on every queue: raw
    bytes are refused on the fleet's queues of a worker of ours too, :mod:`.raw_guard`)."""
    with _lock:
        return _refused[queue] if queue is not None else sum(_refused.values())


def count_refused(queue: str) -> None:
    """One more refusal on ``queue`` (:func:`refused_total`)."""
    with _lock:
        _refused[queue] += 1


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def refuse(app: Celery, message: Any, reason: str) -> bool:
    """Count, log and dead-letter ``message`` if it came from one of our queues (see the module
    docstring); returns whether it did. Never raises (on a surprise, Celery's own answer stands)."""
    try:
        return _refuse(app, message, reason)
    except Exception as exc:
        log.error("alma_schedule: could not refuse a message: %s", _short(exc), exc_info=exc)
        return False


def _refuse(app: Celery, message: Any, reason: str) -> bool:
    composition = composition_of(app)
    queue = our_queue(app, message)
    if composition is None or queue is None:  # another queue of a fleet's worker: Celery's own answer stands
        return False
    dead = composition.settings.dead_queue  # validated: this worker serves our queues
    headers = message.headers if isinstance(message.headers, dict) else {}
    count_refused(queue)
    log.warning(
        "alma_schedule: refused a message on %s (delivery tag %s, id %s, task %s): %s; body %s; dead-lettered to %s",
        queue,
        getattr(message, "delivery_tag", None),
        _short(headers.get("id"), 60),
        _short(headers.get("task"), 80),
        reason,
        _short(message.body),
        dead,
    )
    try:
        dead_letter(app, message, queue, reason, dead)
    except Exception as exc:  # the broker is down: the line above is all that is left of it
        log.error("alma_schedule: could not dead-letter the message to %s: %s", dead, _short(exc))
    return True


def dead_letter(app: Celery, message: Any, queue: str, reason: str, dead: str) -> None:
    """Republish ``message`` (body, content type, encoding) to the queue ``dead``."""
    headers = {
        "x-alma-queue": queue,
        "x-alma-refused": reason,
        "x-alma-headers": message.headers if isinstance(message.headers, dict) else None,
    }
    publish_dead(app, dead, message.body, headers, message.content_type, message.content_encoding)


def publish_dead(
    app: Celery, dead: str, body: Any, headers: dict[str, Any], content_type: Any, content_encoding: Any
) -> None:
    """Publish ``body`` with our ``x-alma-*`` ``headers`` to the queue ``dead``, declared, through
    the default exchange: the copy lands on the queue even when the broker lost the exchange's
    binding while a pooled connection still believes it declared (a Redis flushed or restarted)."""
    from kombu.entity import Exchange, Queue

    target = Queue(dead, Exchange(dead, type="direct"), routing_key=dead)  # type: ignore[no-untyped-call]
    with app.producer_or_acquire() as producer:
        producer.publish(
            body,
            exchange="",
            routing_key=dead,
            declare=[target],
            headers=headers,
            content_type=content_type,
            content_encoding=content_encoding,
            retry=True,
            retry_policy={"max_retries": 3},
        )


def _reason(exc: Any) -> str:
    if exc is None:
        return "not a Celery task message"
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else f"{text[:197]}..."


def _has_id(message: Any) -> bool:
    """Whether Celery's ``on_unknown_task`` finds the text id and the task it reads (headers, else body)."""
    headers = message.headers if isinstance(message.headers, dict) else {}
    if "task" in headers:
        return isinstance(headers.get("id"), str)  # the backend key it marks failed
    try:
        payload = message.payload
    except Exception:
        return False
    return isinstance(payload, dict) and "task" in payload and isinstance(payload.get("id"), str)


class GuardStep(bootsteps.Step):
    """Consumer bootstep: the consumer's answers to a refused message, for our queues (set before the
    consumer binds its handlers: bootsteps are built before any of them starts)."""

    name = "alma_schedule.poison_guard"
    label = "alma_schedule poison guard"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        consumer = parent
        originals = {
            name: getattr(consumer, name)
            for name in ("on_invalid_task", "on_unknown_message", "on_unknown_task", "on_decode_error")
        }

        def refused_here(message: Any, exc: Any) -> bool:
            """Ours: refused (logged once, counted, dead-lettered), then acked; else Celery's answer."""
            if not refuse(consumer.app, message, _reason(exc)):
                return False
            message.reject_log_error(logger, consumer.connection_errors)  # no requeue: acked
            task_rejected.send(sender=consumer, message=message, exc=exc)
            return True

        def invalid_task(body: Any, message: Any, exc: Any) -> None:
            if not refused_here(message, exc):
                originals["on_invalid_task"](body, message, exc)

        def unknown_message(body: Any, message: Any) -> None:
            if not refused_here(message, None):
                originals["on_unknown_message"](body, message)

        def unknown_task(body: Any, message: Any, exc: Any) -> None:
            if not _has_id(message):  # Celery's own answer would raise: refuse it as invalid
                invalid_task(body, message, InvalidTaskError(f"an unknown task without an id: {exc!r}"))
                return
            refuse(consumer.app, message, f"names a task this worker does not run: {exc!r}")
            originals["on_unknown_task"](body, message, exc)  # Celery's answer: reject, mark failed

        def decode_error(message: Any, exc: Any) -> None:
            if refuse(consumer.app, message, f"the body does not decode: {type(exc).__name__}"):
                message.ack()  # as Celery does, without its traceback
            else:
                originals["on_decode_error"](message, exc)

        consumer.strategies = OnlyOurs(consumer.app, consumer.strategies)  # our queues run only our tasks
        consumer.on_invalid_task = invalid_task
        consumer.on_unknown_message = unknown_message
        consumer.on_unknown_task = unknown_task
        consumer.on_decode_error = decode_error


__all__ = [
    "GuardStep",
    "count_refused",
    "dead_letter",
    "our_queue",
    "publish_dead",
    "queue_among",
    "refuse",
    "refused_total",
]
