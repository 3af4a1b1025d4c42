"""What happens to a refused message of our queues: one warning line, a count, a copy on ``alma.dead``.

:class:`GuardStep`, a consumer bootstep ``install`` adds to every app with our tasks, takes over
the consumer's answers to a message it cannot run, for a message that came from one of our queues
(its routing key or exchange; any other queue keeps Celery's own answer):

* ``on_invalid_task``: Celery's answer to ``InvalidTaskError`` (raised by
  :mod:`alma_schedule.tasks.poison` for a message that is no well-formed call of our task) and to
  ``ContentDisallowed`` (pickle);
* ``on_unknown_message``: a message with no Celery headers at all (a raw ``"hello"``);
* ``on_unknown_task``: a task name this worker does not run. Celery's own answer reads the message's
  ``id`` and raises ``TypeError`` when there is none ("Unrecoverable error": the worker exits); such
  a message is answered as invalid instead;
* ``on_decode_error``: a body that is not JSON (acked, as Celery does).

:func:`refuse` then:

1. counts it, per queue, in this process (:func:`refused_total`, for a metrics exporter);
2. logs ONE warning line: the queue, the delivery tag, the message id and task name, the reason, a
   short repr of the body;
3. republishes it to ``dead_queue`` (``alma.dead``; Redis has no dead-letter queue): the original
   body, content type and encoding; the original headers kept under ``x-alma-headers`` (so the copy
   is no task message and nothing runs it by accident), with ``x-alma-queue`` and
   ``x-alma-refused`` (the reason). A failed republish is logged.

Then the message is acked (rejected without requeue: it never comes back) and ``task_rejected``
is sent as Celery does. A task name unknown here (with an id) is refused the same way, then Celery
answers as usual: it rejects it, logs its own error and marks the id failed (``NotRegistered``).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

from celery import bootsteps
from celery.exceptions import InvalidTaskError
from celery.signals import task_rejected

from alma_schedule.tasks.composition import composition_of, our_queue_names

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger(__name__)
#: Celery's consumer logger (the one its own ``reject_log_error`` calls use).
logger = logging.getLogger("celery.worker.consumer.consumer")

_lock = threading.Lock()
_refused: Counter[str] = Counter()


def refused_total(queue: str | None = None) -> int:
    """Messages refused by this process since it started (on ``queue``, or on all our queues)."""
    with _lock:
        return _refused[queue] if queue is not None else sum(_refused.values())


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _queue_of(message: Any, ours: set[str]) -> str | None:
    info = getattr(message, "delivery_info", None) or {}
    for key in ("routing_key", "exchange"):
        value = info.get(key)
        if isinstance(value, str) and value in ours:
            return value
    return None


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
    if composition is None:
        return False
    queue = _queue_of(message, set(our_queue_names(composition).values()))
    if queue is None:  # another queue of a fleet's worker: Celery's own answer stands
        return False
    dead = composition.settings.dead_queue  # validated: this worker serves our queues
    headers = message.headers if isinstance(message.headers, dict) else {}
    with _lock:
        _refused[queue] += 1
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
    from kombu.entity import Exchange, Queue

    exchange = Exchange(dead, type="direct")  # type: ignore[no-untyped-call]
    target = Queue(dead, exchange, routing_key=dead)  # type: ignore[no-untyped-call]
    headers = {
        "x-alma-queue": queue,
        "x-alma-refused": reason,
        "x-alma-headers": message.headers if isinstance(message.headers, dict) else None,
    }
    with app.producer_or_acquire() as producer:
        producer.publish(
            message.body,
            exchange=exchange,
            routing_key=dead,
            declare=[target],
            headers=headers,
            content_type=message.content_type,
            content_encoding=message.content_encoding,
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

        consumer.on_invalid_task = invalid_task
        consumer.on_unknown_message = unknown_message
        consumer.on_unknown_task = unknown_task
        consumer.on_decode_error = decode_error


__all__ = ["GuardStep", "dead_letter", "refuse", "refused_total"]
