"""``CeleryDispatcher``: how claimed fires and polls leave a tick, through Celery's public API.
docs/architecture.md, section "The modules, in detail" (tasks/dispatcher.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import DispatchError
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, RunRecord
from alma_schedule.model.names import ALERT_TASK
from alma_schedule.model.overdue import OverdueFire
from alma_schedule.tasks.publisher import Parent, Publisher, parent_of, publish_batch
from alma_schedule.tasks.staged import StagedSend

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.settings import Settings

log = logging.getLogger(__name__)


class CeleryDispatcher:
    """The engine's :class:`~alma_schedule.model.Dispatcher` over a Celery app.
    docs/architecture.md, section "The modules, in detail" (tasks/dispatcher.py).
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
        parent = parent_of(self.app)

        @contextmanager
        def inside() -> Iterator[None]:
            self._local.parent = parent
            try:
                yield
            finally:
                del self._local.parent

        return inside

    def _parent(self) -> Parent | None:
        """Whose messages these are: the parent carried into this thread, else Celery's current task."""
        carried: Parent | None = getattr(self._local, "parent", None)
        return carried if carried is not None else parent_of(self.app)

    # ------------------------------------------------------------------ sends

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        """Send the claimed fires: one ``alma_schedule.run`` message per record, expiring at
        ``record.expires_at``; or, when there are more than ``run_batch_size`` of them, packed
        ``run_batch_size`` to an ``alma_schedule.run_many`` message (ordered by expiry; the message
        expires with its earliest fire, each fire carries its own ``expires_at``)."""
        name, messages = self._run_messages(runs)
        self._send(name, messages, len(messages))

    def stage_runs(self, runs: Sequence[RunRecord]) -> StagedSend | None:
        """The messages ``send_runs(runs)`` would send, built and published into a publish batch held open
        (nothing reaches the broker) until the returned :class:`.staged.StagedSend` is sent or discarded,
        on THIS thread. None when there is nothing to stage or no publish batch; raises as ``send_runs``.
        docs/architecture.md, section "The modules, in detail" (tasks/dispatcher.py).
        """
        if not runs:
            return None
        self.refuse_lost_sends()
        name, messages = self._run_messages(runs)
        stack = ExitStack()
        try:
            producer = stack.enter_context(self.app.producer_or_acquire())
            if not _batches(producer):
                stack.close()
                return None
            stack.enter_context(publish_batch(producer, len(messages)))
            publish = Publisher(self.app, name, producer, batched=True, parent=self._parent())
            for args, expires in messages:
                publish(args, expires)
            publish.flush_events()
        except BaseException as exc:
            stack.__exit__(type(exc), exc, exc.__traceback__)  # the batch discarded, the producer released
            raise
        return StagedSend(self, runs, name, messages, stack)

    def _run_messages(self, runs: Sequence[RunRecord]) -> tuple[str, list[tuple[list[Any], datetime | None]]]:
        """The task name and the ``(args, expires)`` of each message that sends ``runs``."""
        size = self.settings.run_batch_size
        if size <= 1 or len(runs) <= size:
            return RUN_TASK, [([r.org, r.uid, r.routine_id, r.run_id], r.expires_at) for r in runs]
        ordered = sorted(runs, key=lambda r: r.expires_at)
        chunks = [ordered[i : i + size] for i in range(0, len(ordered), size)]
        texts: dict[datetime, str] = {}  # each expiry written once (a tick's fires share a few)
        # each fire: the fields of RunKey.args() (the key's validation is not redone per fire)
        return RUN_MANY_TASK, [
            ([[[r.org, r.uid, r.routine_id, r.run_id, _iso(texts, r.expires_at)] for r in chunk]], chunk[0].expires_at)
            for chunk in chunks
        ]

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

    def send_alerts(self, fires: Sequence[OverdueFire]) -> None:
        """One ``alma_schedule.alert`` message per overdue fire (the collect queue): the task posts it
        to ``alert_webhook`` and retries itself until a 2xx (:mod:`alma_schedule.tasks.alert`)."""
        items = (([f.org, f.uid, f.routine_id, f.fire_at.isoformat()], None) for f in fires)
        self._send(ALERT_TASK, items, len(fires))

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
        self.publish_each(name, messages)

    def publish_each(self, name: str, messages: list[tuple[list[Any], datetime | None]]) -> None:
        """Publish each of ``messages`` at once, with kombu's publish retry (no batch): the way a
        batch whose flush failed is sent again (a message of it that had left loses the run's CAS)."""
        self._publish(name, messages, batched=False)

    def _publish(self, name: str, messages: list[tuple[list[Any], datetime | None]], *, batched: bool) -> None:
        sent, total = 0, len(messages)
        try:
            with self.app.producer_or_acquire() as producer, publish_batch(producer, total, batched):
                publish = Publisher(self.app, name, producer, batched=batched, parent=self._parent())
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


def _batches(producer: Any) -> bool:
    """The producer's channel holds a publish batch's messages until its flush (kombu >= 5.7:
    ``Producer.batch`` over a channel with ``create_publish_batch``; on any other channel kombu
    publishes each message at once)."""
    channel = producer.channel
    return (
        callable(getattr(producer, "batch", None))
        and callable(getattr(channel, "create_publish_batch", None))
        and bool(getattr(channel, "supports_batch_publish", True))
    )


def _iso(texts: dict[datetime, str], at: datetime) -> str:
    """``at.isoformat()``, kept in ``texts`` for UTC instants (the store's: equal instants in two
    zones are equal keys but different texts, so any other zone is written each time)."""
    if at.tzinfo is not UTC:
        return at.isoformat()
    text = texts.get(at)
    if text is None:
        text = texts[at] = at.isoformat()
    return text


def queue_depth(app: Celery, queue: str) -> int | None:
    """Messages waiting in ``queue`` per the broker, through a passive ``queue_declare``.
    docs/architecture.md, section "The modules, in detail" (tasks/dispatcher.py).
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
