"""The private shapes of Celery that :mod:`alma_schedule.compat.celery` relies on, held against the
INSTALLED Celery (no mock), on kombu's memory transport (no server): a release that changes one
fails here, before the tick's publisher or the beat importer misbehaves."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import kombu
import pytest
from celery import Celery
from celery.events.dispatcher import EventDispatcher
from celery.schedules import crontab

from alma_schedule.compat.celery import (
    crontab_as_written,
    exec_options,
    prepare_event,
    publish_events,
    selected_queues,
    task_registry,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def app() -> Iterator[Celery]:
    new = Celery("compat", set_as_current=False, broker="memory://")

    @new.task(name="compat.job", queue="q1", priority=3, time_limit=30, lazy=False, shared=False)
    def job() -> None:
        return None

    yield new
    new.close()


def test_the_task_registry_is_read_without_finalizing_the_app(app: Celery) -> None:
    assert "_tasks" in vars(app)
    registry = task_registry(app)
    assert "compat.job" in registry and registry.get("compat.missing") is None
    assert not app.finalized  # app.tasks would have finalized it
    assert task_registry(app) is app.tasks  # the same registry, once finalized


def test_a_tasks_exec_options_are_what_send_task_merges(app: Celery) -> None:
    assert inspect.ismethod(task_registry(app)["compat.job"]._get_exec_options)
    options = exec_options(task_registry(app)["compat.job"])
    assert options["queue"] == "q1" and options["priority"] == 3 and options["time_limit"] == 30
    assert {"expires", "soft_time_limit", "serializer", "routing_key", "exchange"} <= set(options)
    options["queue"] = "changed"
    assert exec_options(task_registry(app)["compat.job"])["queue"] == "q1"  # a copy
    assert exec_options(None) == {} and exec_options(object()) == {}


def test_events_are_made_without_publish_and_published_as_one_group(app: Celery) -> None:
    params = inspect.signature(EventDispatcher._publish).parameters
    assert list(params)[:4] == ["self", "event", "producer", "routing_key"]
    assert list(inspect.signature(EventDispatcher._prepare_event).parameters)[:3] == ["self", "type", "fields"]
    with app.connection_for_write() as conn:
        channel: Any = conn.default_channel
        dispatcher = app.events.Dispatcher(channel=channel, enabled=False)  # as the publisher makes it
        assert isinstance(dispatcher, EventDispatcher)
        dispatcher.exchange = dispatcher.exchange(channel)
        events = [prepare_event(dispatcher, "task-sent", {"uuid": f"id-{i}", "name": "compat.job"}) for i in range(3)]
        for event in events:
            assert event["type"] == "task-sent" and event["hostname"] == dispatcher.hostname
            assert {"pid", "clock", "timestamp", "utcoffset"} <= set(event)
        assert [e["clock"] for e in events] == sorted(e["clock"] for e in events)  # the app's clock moves on
        watcher = kombu.Queue("compat.events", dispatcher.exchange, routing_key="task.#")(channel)
        watcher.declare()
        publish_events(dispatcher, events, kombu.Producer(channel), "task.multi")
        message = watcher.get(no_ack=True)
        assert message is not None and watcher.get(no_ack=True) is None  # ONE message
        assert message.delivery_info["routing_key"] == "task.multi"
        assert message.delivery_info["exchange"] == dispatcher.exchange.name == "celeryev"
        assert [e["uuid"] for e in message.payload] == ["id-0", "id-1", "id-2"]


def test_a_crontab_keeps_each_field_as_written() -> None:
    value = crontab(minute="*/15", hour="8-17", day_of_week="mon-fri", month_of_year=3)
    assert crontab_as_written(value, "minute") == "*/15"
    assert crontab_as_written(value, "hour") == "8-17"
    assert crontab_as_written(value, "day_of_week") == "mon-fri"
    assert crontab_as_written(value, "month_of_year") == 3
    assert crontab_as_written(value, "day_of_month") == "*"
    assert value.minute == {0, 15, 30, 45}  # the public attribute: the expanded set, not the text


def test_selected_queues_tell_a_worker_given_q_from_a_plain_one(app: Celery) -> None:
    """None until ``-Q`` selects (``Queues.select``, what the worker does with ``-Q``), then the chosen queues."""
    queues = app.amqp.queues
    assert selected_queues(queues) is None
    assert queues.consume_from  # the public property answers the defaults either way
    queues.select(["q1"])
    chosen = selected_queues(queues)
    assert chosen is not None and list(chosen) == ["q1"]
