"""One Celery message per call, as ``app.send_task`` builds and publishes it (:class:`Publisher`),
with what is the same for every message of a dispatch done once; used by the Celery dispatcher.

docs/architecture.md, section "The modules, in detail" (tasks/publisher.py).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from celery.utils.nodenames import anon_nodename
from kombu.utils.uuid import uuid

from alma_schedule.compat import celery as celery_compat
from alma_schedule.compat import kombu as kombu_compat

if TYPE_CHECKING:
    from celery import Celery

_celery_log = logging.getLogger("celery.app.base")  # where app.send_task warns of a past expiry
_EXPIRED = (
    "%s has an expiration date in the past (%ss ago).\nWe assume this is intended and so we have set the "
    "expiration date to 0 instead.\nAccording to RabbitMQ's documentation:\n\"Setting the TTL to 0 causes "
    'messages to be expired upon reaching a queue unless they can be delivered to a consumer immediately."\n'
    "If this was unintended, please check the code which published this task."
)


#: Celery's own bound on the ``argsrepr`` header (``amqp.argsrepr_maxsize``).
ARGSREPR_MAX = 1024


def argsrepr(args: list[Any]) -> str:
    """The ``argsrepr`` header (what Flower and the worker log show) of our arguments: the builtin
    ``repr``, cut at Celery's bound.

    docs/architecture.md, "The modules, in detail" (tasks/publisher.py, argsrepr).
    """
    if len(args) == 1 and type(args[0]) is list:
        parts, size = [], 2
        for item in args[0]:
            part = repr(item)
            parts.append(part)
            size += len(part) + 2
            if size > ARGSREPR_MAX + 2:  # the cut falls inside what is written already
                break
        text = "[[" + ", ".join(parts) + "]]"
    else:
        text = repr(args)
    return text if len(text) <= ARGSREPR_MAX else text[: ARGSREPR_MAX - 3] + "..."


class Publisher:
    """One message of ``name`` per call through ``producer``: what ``app.send_task`` does, the same message
    published the same way, with what does not change from message to message done once per dispatch.

    docs/architecture.md, "The modules, in detail" (tasks/publisher.py, Publisher).
    """

    def __init__(self, app: Celery, name: str, producer: Any, *, batched: bool, parent: Parent | None) -> None:
        from celery.app.routes import MapRoute
        from kombu.entity import Queue

        amqp, conf = app.amqp, app.conf
        self.app, self.name, self.producer = app, name, producer
        self.task = celery_compat.task_registry(app).get(name)
        options = {k: v for k, v in celery_compat.exec_options(self.task).items() if v is not None}
        options["serializer"] = "json"
        self.time_limit = options.pop("time_limit", None)
        self.soft_time_limit = options.pop("soft_time_limit", None)
        options.pop("expires", None)
        self.root_id = self.parent_id = None
        if parent is not None:
            self.root_id, self.parent_id = parent.root_id, parent.parent_id
            if conf.task_inherit_parent_priority:
                options.setdefault("priority", parent.priority)
        self.options = options
        self.router = amqp.router
        self.routed: dict[str, Any] | None = None
        if all(isinstance(r, MapRoute) for r in self.router.routes):  # by name: the same for every message
            self.routed = self.router.route(dict(options), name, (), None, self.task)
        self.reply_to = app.thread_oid
        self.sent_event = bool(conf.task_send_sent_event)
        self.now = _utc(app.now())
        self.origin = anon_nodename()
        self.create = amqp.create_task_message
        self.send = amqp.send_task_message
        self.bound: dict[str, Any] = {}
        self.grouped: _GroupedEvents | None = None
        if batched:
            channel = producer.channel
            queue = (self.routed or {}).get("queue")
            if type(queue) is Queue:  # a Broadcast queue is not declared
                self.bound["declare"] = [queue(channel)]
            if self.sent_event:
                evd = app.events.Dispatcher(channel=channel, enabled=False)
                evd.exchange = evd.exchange(channel)
                self.grouped = _GroupedEvents(evd, producer)
                self.bound["event_dispatcher"] = self.grouped
            self.bound["retry"] = False

    def __call__(self, args: list[Any], expires: datetime | None) -> None:
        extra = {"argsrepr": argsrepr(args), "kwargsrepr": "{}"}
        if self.routed is not None:
            options = {**self.routed, **extra}
        else:
            options = self.router.route({**self.options, **extra}, self.name, args, None, self.task)
        task_id = uuid()
        if expires is not None:
            seconds = (_utc(expires) - self.now).total_seconds()
            if seconds < 0:  # as Celery: expired already, a TTL of 0 (its warning, on its logger)
                _celery_log.warning(_EXPIRED, task_id, -seconds)
                seconds = 0
            options["expiration"] = seconds
        message = self.create(
            task_id, self.name, args, None, None, None, None, None, expires, 0, None, None, None,
            self.reply_to, self.time_limit, self.soft_time_limit, self.sent_event, self.root_id, self.parent_id,
            None, None, ignore_result=True, replaced_task_nesting=0, origin=self.origin, **options,
        )  # fmt: skip
        producer = self.producer
        with kombu_compat.reraise_as_library_errors(producer.connection):
            self.send(producer, self.name, message, **options, **self.bound)

    def flush_events(self) -> None:
        """Publish the ``task-sent`` events held for this batch (a batch without events: nothing)."""
        if self.grouped is not None:
            self.grouped.flush()


#: The most ``task-sent`` events one grouped event message carries.
EVENTS_PER_GROUP = 100


class _GroupedEvents:
    """The ``task-sent`` events of one publish batch, sent grouped (up to :data:`EVENTS_PER_GROUP` an
    event message, routing key ``task.multi``) as Celery's own worker sends its task events; stands in
    for the event dispatcher ``send_task_message`` is handed, which only calls its ``publish``.
    docs/architecture.md, section "The modules, in detail" (tasks/publisher.py)."""

    def __init__(self, dispatcher: Any, producer: Any) -> None:
        self.dispatcher, self.producer = dispatcher, producer
        self.events: list[Any] = []

    def publish(self, type: str, fields: dict[str, Any], producer: Any, **_retry: Any) -> None:
        self.events.append(celery_compat.prepare_event(self.dispatcher, type, fields))

    def flush(self) -> None:
        events, self.events = self.events, []
        for start in range(0, len(events), EVENTS_PER_GROUP):
            celery_compat.publish_events(
                self.dispatcher, events[start : start + EVENTS_PER_GROUP], self.producer, "task.multi"
            )


@dataclass(frozen=True, slots=True)
class Parent:
    """What a message takes from the task that sends it (``app.send_task``'s reading of
    ``app.current_worker_task``), read in that task's own thread: its request is per thread."""

    root_id: str | None
    parent_id: str | None
    priority: Any


def parent_of(app: Celery) -> Parent | None:
    task = app.current_worker_task
    if not task:
        return None
    request = task.request
    return Parent(request.root_id or request.id, request.id, (request.delivery_info or {}).get("priority"))


def _utc(at: datetime) -> datetime:
    """``at`` in UTC, a naive one taken as UTC (as Celery's ``subtract_datetimes``)."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def publish_batch(producer: Any, total: int, batched: bool = True) -> Any:
    """The producer's publish batch for ``total`` messages (each with its event and, on a queue
    with an expiry, its PEXPIREs: 4 operations a message leave room), else (or not ``batched``) no
    batch. A batch that fails to flush reports how many messages were handed to it: their delivery
    is uncertain; ``CeleryDispatcher._send`` then sends them again one at a time (a duplicate loses the run's CAS)."""
    batch = getattr(producer, "batch", None) if batched else None
    return batch(max_size=max(1000, 4 * total)) if callable(batch) else nullcontext()
