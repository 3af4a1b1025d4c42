"""``CeleryDispatcher``: how claimed fires and polls leave a tick, through Celery's public API.

Every message is the one ``app.send_task`` would build and publish (``_Publisher``: the message of
``app.amqp.create_task_message``, published by ``app.amqp.send_task_message``, with what is the same
for every message of a dispatch done once), with one producer (one broker connection) per batch,
inside the producer's publish batch (kombu >= 5.7 ``Producer.batch``: on Redis the messages and
their ``task-sent`` events of one dispatch leave in ONE pipelined round trip; a transport without
batches publishes each at once; a batch that fails to flush is sent again one message at a time with
kombu's publish retry), always ``serializer='json'`` (whatever the app's
``task_serializer``), so the app's ``task_routes`` decide the queue, the ``before_task_publish`` /
``after_task_publish`` signals fire and ``task-sent`` events are
emitted when the app has ``task_send_sent_event`` on (Flower sees the sends). Run messages expire
at the fire's ``expires_at``: Celery discards an expired message and the tick's expiry sweep then records the
fire ``skipped(missed)``. Nothing here writes to the store: a message that could not be sent
leaves its row ``claimed`` and a later tick re-sends it.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from celery.utils.nodenames import anon_nodename
from kombu.utils.uuid import uuid

from alma_schedule.errors import DispatchError
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, RunRecord

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.settings import Settings

log = logging.getLogger(__name__)
_celery_log = logging.getLogger("celery.app.base")  # where app.send_task warns of a past expiry
_EXPIRED = (
    "%s has an expiration date in the past (%ss ago).\nWe assume this is intended and so we have set the "
    "expiration date to 0 instead.\nAccording to RabbitMQ's documentation:\n\"Setting the TTL to 0 causes "
    "messages to be expired upon reaching a queue unless they can be delivered to a consumer immediately.\"\n"
    "If this was unintended, please check the code which published this task."
)


class CeleryDispatcher:
    """The engine's :class:`~alma_schedule.model.Dispatcher` over a Celery app.

    ``send_runs`` and ``send_collects`` send one message per record, all through ONE producer
    acquired from the app's pool; they raise :class:`DispatchError` (naming how many were sent)
    when the broker refuses. ``run_queue_depth`` asks the broker how many messages wait in the
    run queue (None when it cannot tell).
    """

    #: Its sends only publish (nothing runs in this process): the tick may start its end before its
    #: last sends (:mod:`alma_schedule.engine.outbox`).
    sends_only = True

    def __init__(self, app: Celery, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self._local = threading.local()  # per thread: the parent another thread carried in

    def caller_context(self) -> Callable[[], AbstractContextManager[None]]:
        """Called in the tick's thread: a context for another thread (the tick's claim batches past
        the first, :mod:`alma_schedule.engine.claims`) in which this dispatcher's messages name the
        tick's current Celery task as their parent, as the tick's own sends do (Celery keeps its
        current task and its request per thread: without this, those messages had no ``parent_id``)."""
        parent = _parent_of(self.app)

        @contextmanager
        def inside() -> Iterator[None]:
            self._local.parent = parent
            try:
                yield
            finally:
                del self._local.parent

        return inside

    def _parent(self) -> _Parent | None:
        """Whose messages these are: the parent carried into this thread, else Celery's current task."""
        carried: _Parent | None = getattr(self._local, "parent", None)
        return carried if carried is not None else _parent_of(self.app)

    # ------------------------------------------------------------------ sends

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        """Send the claimed fires: one ``alma_schedule.run`` message per record, expiring at
        ``record.expires_at``; or, when there are more than ``run_batch_size`` of them, packed
        ``run_batch_size`` to an ``alma_schedule.run_many`` message (ordered by expiry; the message
        expires with its earliest fire, each fire carries its own ``expires_at``)."""
        size = self.settings.run_batch_size
        if size <= 1 or len(runs) <= size:
            self.send_each(([r.org, r.uid, r.routine_id, r.run_id], r.expires_at) for r in runs)
            return
        ordered = sorted(runs, key=lambda r: r.expires_at)
        chunks = [ordered[i : i + size] for i in range(0, len(ordered), size)]
        texts: dict[datetime, str] = {}  # each expiry written once (a tick's fires share a few)
        items = (
            ([[r.org, r.uid, r.routine_id, r.run_id, _iso(texts, r.expires_at)] for r in chunk], chunk[0].expires_at)
            for chunk in chunks
        )  # the fields of RunKey.args() (the key's validation is not redone per fire)
        self._send(RUN_MANY_TASK, (([fires], expires) for fires, expires in items), len(chunks))

    def send_each(self, fires: Iterable[tuple[list[str], datetime | None]]) -> None:
        """One ``alma_schedule.run`` message per ``(key args, expires_at)``."""
        items = list(fires)
        self._send(RUN_TASK, items, len(items))

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        """One ``alma_schedule.collect`` message per submitted record (its key is the collect run id).

        A collect message expires at the record's next poll (by then a later tick sends a fresh one),
        never sooner than ``poll_first`` from now.
        """
        floor = self.settings.clock() + self.settings.poll_first
        items = (([r.org, r.uid, r.routine_id, r.run_id], max(r.next_poll_at or floor, floor)) for r in runs)
        self._send(COLLECT_TASK, items, len(runs))

    def refuse_lost_sends(self) -> None:
        """Refuse (:class:`ConfigurationError`, naming both settings) to send from a production store
        to the ``memory://`` broker: nothing outside this process would ever receive the messages."""
        from alma_schedule.settings import refuse_lost_sends
        from alma_schedule.tasks.bound import is_fleet_app

        fleet = is_fleet_app(self.app)
        broker = f"the broker_url of the Celery app {self.app.main!r}" if fleet else "ALMA_BROKER_URL"
        refuse_lost_sends(self.settings, str(self.app.conf.broker_url or ""), broker=broker)

    def _send(self, name: str, items: Iterable[tuple[list[Any], datetime | None]], total: int) -> None:
        """Send in one publish batch; a batch that fails to flush (a broker blip) is sent again one
        message at a time with kombu's publish retry, as without batches: a message of the failed
        flush may have left, and its duplicate loses the run's start CAS (nothing runs twice)."""
        if total == 0:
            return
        self.refuse_lost_sends()
        messages = list(items)
        try:
            self._publish(name, messages, batched=True)
            return
        except DispatchError as exc:
            log.warning("%s; sending them again one at a time, with the publish retry", exc)
        self._publish(name, messages, batched=False)

    def _publish(self, name: str, messages: list[tuple[list[Any], datetime | None]], *, batched: bool) -> None:
        sent, total = 0, len(messages)
        try:
            with self.app.producer_or_acquire() as producer, _batch(producer, total, batched):
                publish = _Publisher(self.app, name, producer, batched=batched, parent=self._parent())
                for args, expires in messages:
                    publish(args, expires)
                    sent += 1
                publish.flush_events()
        except Exception as exc:
            log.warning("sent %d of %d %s messages: %s", sent, total, name, type(exc).__name__)
            raise DispatchError(
                f"the broker refused {name} messages after {sent} of {total} "
                f"({type(exc).__name__}); the unsent fires stay claimed and are re-sent by a later tick"
            ) from exc

    # ------------------------------------------------------------------ depth

    def run_queue_depth(self) -> int | None:
        """Messages waiting in the run queue (a passive declare); 0 when the broker has no such queue
        yet; None when the broker cannot say (unreachable, or a transport without counts)."""
        return queue_depth(self.app, self.settings.run_queue)


#: Celery's own bound on the ``argsrepr`` header (``amqp.argsrepr_maxsize``).
ARGSREPR_MAX = 1024


def _argsrepr(args: list[Any]) -> str:
    """The ``argsrepr`` header (what Flower and the worker log show) of our arguments, which are
    strings and lists of strings: the builtin ``repr``, cut at Celery's bound. Celery's own
    ``saferepr`` took 0.64 ms a ``run_many`` message of 20 fires against 0.05 ms (measured, a
    loaded 2-core machine): 0.3 s of a tick that sends 450 such messages. A ``run_many``'s one
    argument, its list of fires, is written only as far as the bound reaches (``repr`` of a list
    is its items' ``repr`` joined by ``", "`` in brackets: the same text, cut at the same place)."""
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


class _Publisher:
    """One message of ``name`` per call through ``producer``: what ``app.send_task(name, args=args,
    expires=expires, producer=producer, serializer="json", ignore_result=True, add_to_parent=False,
    argsrepr=..., kwargsrepr="{}")`` does (celery/app/base.py ``send_task``), the same message
    (``app.amqp.create_task_message``) published the same way (``app.amqp.send_task_message``: the
    ``before_task_publish`` / ``after_task_publish`` signals, the ``task-sent`` event when the app has
    ``task_send_sent_event`` on, the queue declared), with what does not change from message to
    message done once per dispatch: the current time the messages' TTLs count from (Celery's
    ``app.now()``, read once: a batch's messages all leave at its flush), the task's execution
    options, the route (the app's
    ``task_routes``: once when every router is a mapping, which routes by task name alone; per
    message when one is a function, which may look at the arguments), the parent task (the tick's
    request), the reply-to id and the origin. Left out: the result backend's ``on_task_call`` (our
    messages ignore their result), the ``AsyncResult`` and the parent's trail (not added to the
    parent). A subclass's ``send_task`` override is not called (the ready app's own check,
    ``refuse_lost_sends``, runs once per dispatch in ``_send``).

    In a publish batch (``batched``) nothing reaches the broker before the batch's flush, so the
    entities to declare (the queue, the event exchange) are bound to the producer's channel once
    instead of copied and bound per message, and the ``task-sent`` events go out grouped
    (:class:`_GroupedEvents`, :meth:`flush_events`); outside a batch each message goes out as
    Celery's own send would (its event on its own, and its publish retry).
    """

    def __init__(self, app: Celery, name: str, producer: Any, *, batched: bool, parent: _Parent | None) -> None:
        from celery.app.routes import MapRoute
        from kombu.entity import Queue

        amqp, conf = app.amqp, app.conf
        self.app, self.name, self.producer = app, name, producer
        self.task = app._tasks.get(name)
        get_options = getattr(self.task, "_get_exec_options", None)
        options: dict[str, Any] = {}
        if inspect.ismethod(get_options):
            options = {k: v for k, v in (get_options() or {}).items() if v is not None}
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
        extra = {"argsrepr": _argsrepr(args), "kwargsrepr": "{}"}
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
        with producer.connection._reraise_as_library_errors():
            self.send(producer, self.name, message, **options, **self.bound)

    def flush_events(self) -> None:
        """Publish the ``task-sent`` events held for this batch (a batch without events: nothing)."""
        if self.grouped is not None:
            self.grouped.flush()


#: The most ``task-sent`` events one grouped event message carries.
EVENTS_PER_GROUP = 100


class _GroupedEvents:
    """The ``task-sent`` events of one publish batch, sent as event messages that each carry a list
    of up to :data:`EVENTS_PER_GROUP` of them (routing key ``task.multi``): the grouped form Celery's
    own worker sends its task events in (``EventDispatcher(buffer_group=['task'])``), which every
    event receiver (``app.events.Receiver``: Flower, the Prometheus exporters) reads event by event.
    Each event is the one Celery's send would publish (``EventDispatcher._prepare_event``: type,
    hostname, pid, clock, timestamp, utcoffset and the fields); one event message instead of one per
    task message (measured: the events were a third of a dispatch's Python, 3 of 9.4 ms for 50
    ``run_many`` messages). Stands in for the event dispatcher ``send_task_message`` is handed, which
    only calls its ``publish``."""

    def __init__(self, dispatcher: Any, producer: Any) -> None:
        self.dispatcher, self.producer = dispatcher, producer
        self.events: list[Any] = []

    def publish(self, type: str, fields: dict[str, Any], producer: Any, **_retry: Any) -> None:
        self.events.append(self.dispatcher._prepare_event(type, fields))

    def flush(self) -> None:
        events, self.events = self.events, []
        for start in range(0, len(events), EVENTS_PER_GROUP):
            self.dispatcher._publish(events[start : start + EVENTS_PER_GROUP], self.producer, "task.multi")


@dataclass(frozen=True, slots=True)
class _Parent:
    """What a message takes from the task that sends it (``app.send_task``'s reading of
    ``app.current_worker_task``), read in that task's own thread: its request is per thread."""

    root_id: str | None
    parent_id: str | None
    priority: Any


def _parent_of(app: Celery) -> _Parent | None:
    task = app.current_worker_task
    if not task:
        return None
    request = task.request
    return _Parent(request.root_id or request.id, request.id, (request.delivery_info or {}).get("priority"))


def _iso(texts: dict[datetime, str], at: datetime) -> str:
    """``at.isoformat()``, kept in ``texts`` for UTC instants (the store's: equal instants in two
    zones are equal keys but different texts, so any other zone is written each time)."""
    if at.tzinfo is not UTC:
        return at.isoformat()
    text = texts.get(at)
    if text is None:
        text = texts[at] = at.isoformat()
    return text


def _utc(at: datetime) -> datetime:
    """``at`` in UTC, a naive one taken as UTC (as Celery's ``subtract_datetimes``)."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _batch(producer: Any, total: int, batched: bool = True) -> Any:
    """The producer's publish batch for ``total`` messages (each with its event and, on a queue
    with an expiry, its PEXPIREs: 4 operations a message leave room), else (or not ``batched``) no
    batch. A batch that fails to flush reports how many messages were handed to it: their delivery
    is uncertain; ``_send`` then sends them again one at a time (a duplicate loses the run's CAS)."""
    batch = getattr(producer, "batch", None) if batched else None
    return batch(max_size=max(1000, 4 * total)) if callable(batch) else nullcontext()


def queue_depth(app: Celery, queue: str) -> int | None:
    """Messages waiting in ``queue`` per the broker, through a passive ``queue_declare``.

    The declare goes through a producer of the app's pool, on the channel its sends use: a virtual
    transport's channel (Redis: the LLEN of the queue's lists, an empty queue has no key: NOT_FOUND
    -> 0) survives a NOT_FOUND, so the pooled broker connection is reused from tick to tick and no
    connection is opened per check. An AMQP broker closes a channel on NOT_FOUND: there the
    declare takes a channel of its own on the pooled connection (no new connection), closed after.
    """
    from kombu.transport.virtual import Channel as VirtualChannel

    try:
        with app.producer_or_acquire() as producer:
            if isinstance(producer.channel, VirtualChannel):
                return _declared_count(producer.channel, queue)
            channel: Any = producer.connection.channel()
            try:
                return _declared_count(channel, queue)
            finally:
                try:
                    channel.close()
                except Exception:  # a channel a failed passive declare already closed
                    pass
    except Exception as exc:
        log.debug("run queue depth unknown: %s", type(exc).__name__)
        return None


def _declared_count(channel: Any, queue: str) -> int:
    try:
        _name, count, _consumers = channel.queue_declare(queue=queue, passive=True)
        return int(count)
    except Exception as exc:
        if _not_found(exc):
            return 0
        raise


def _not_found(exc: BaseException) -> bool:
    code = getattr(exc, "reply_code", None)
    return str(code) == "404" or "NOT_FOUND" in str(exc)
