"""Celery's private parts that we use, each behind one function (``docs/architecture.md``, "Private
calls into dependencies"; pinned by ``tests/compat/test_compat_celery.py``).

Why any: :class:`alma_schedule.tasks.publisher.Publisher` builds and publishes a dispatch's messages
as ``app.send_task`` would, with what is the same for every message done once (the tick sends
hundreds of messages), and groups their ``task-sent`` events; the Celery-beat importer
(:mod:`alma_schedule.beat.convert`) reads a ``crontab`` as it was written.

Celery is the ``celery`` extra: nothing is imported here at import time.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["crontab_as_written", "exec_options", "prepare_event", "publish_events", "task_registry"]


def task_registry(app: Any) -> Any:
    """``app._tasks``: the app's task registry (a mapping of task name to task), as it is NOW.

    Private: the public ``app.tasks`` finalizes the app first (its pending task decorators run, its
    built-in tasks are added); a send must not finalize a fleet's app as a side effect, and Celery's
    own ``send_task`` reads ``_tasks`` for the same reason."""
    return app._tasks


def exec_options(task: Any) -> dict[str, Any]:
    """The execution options of ``task`` (its ``queue``, ``priority``, ``time_limit``, ...: what
    ``send_task`` merges into a message's options), from its method ``_get_exec_options()`` (cached
    on the task); ``{}`` for None or an object without that method.

    Private: the method of ``celery.app.task.Task`` that ``app.send_task`` calls. A copy: the
    caller may change it."""
    get_options = getattr(task, "_get_exec_options", None)
    if not inspect.ismethod(get_options):
        return {}
    return dict(get_options() or {})


def prepare_event(dispatcher: Any, type: str, fields: dict[str, Any]) -> Any:
    """``dispatcher._prepare_event(type, fields)``: the event ``dispatcher`` (an
    ``app.events.Dispatcher``) would publish for ``type`` and ``fields`` (type, hostname, pid,
    clock, timestamp, utcoffset and the fields), without publishing it.

    Private: the first half of ``EventDispatcher.publish``. The tick's dispatch keeps each
    ``task-sent`` event of a publish batch and sends them grouped (``_GroupedEvents`` in
    :mod:`alma_schedule.tasks.publisher`), so it needs the event without its publish."""
    return dispatcher._prepare_event(type, fields)


def publish_events(dispatcher: Any, events: list[Any], producer: Any, routing_key: str) -> None:
    """``dispatcher._publish(events, producer, routing_key)``: publish ``events`` (a list of events
    made by :func:`prepare_event`) as ONE event message with ``routing_key`` (``task.multi``: the
    grouped form Celery's own worker sends, ``EventDispatcher(buffer_group=[...])``) through
    ``producer``, to the dispatcher's exchange with its serializer and headers.

    Private: the second half of ``EventDispatcher.publish``, which Celery's ``flush`` calls with
    grouped events; no public call sends a group."""
    dispatcher._publish(events, producer, routing_key)


def crontab_as_written(value: Any, field: str) -> Any:
    """The ``field`` of the Celery ``crontab`` ``value`` as it was written (``'*/15'``,
    ``'mon-fri'``, an int, a set...): its attribute ``_orig_<field>`` for ``field`` one of
    ``minute``, ``hour``, ``day_of_month``, ``month_of_year``, ``day_of_week``.

    Private: ``crontab`` keeps the text it was given only there (its public attributes hold the
    expanded sets); the beat importer converts the written text to our cron and says when it had to
    be rewritten (:mod:`alma_schedule.beat.convert`)."""
    return getattr(value, f"_orig_{field}")
