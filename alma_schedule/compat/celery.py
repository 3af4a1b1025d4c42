"""Celery's private parts that we use, each behind one function (``docs/architecture.md``, "Private
calls into dependencies"; pinned by ``tests/compat/test_compat_celery.py``).

docs/architecture.md, section "The modules, in detail" (compat/celery.py).
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["crontab_as_written", "exec_options", "prepare_event", "publish_events", "selected_queues", "task_registry"]


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

    docs/architecture.md, "The modules, in detail" (compat/celery.py, exec_options).
    """
    get_options = getattr(task, "_get_exec_options", None)
    if not inspect.ismethod(get_options):
        return {}
    return dict(get_options() or {})


def prepare_event(dispatcher: Any, type: str, fields: dict[str, Any]) -> Any:
    """``dispatcher._prepare_event(type, fields)``: the event ``dispatcher`` (an
    ``app.events.Dispatcher``) would publish for ``type`` and ``fields`` (type, hostname, pid,
    clock, timestamp, utcoffset and the fields), without publishing it.

    docs/architecture.md, "The modules, in detail" (compat/celery.py, prepare_event).
    """
    return dispatcher._prepare_event(type, fields)


def publish_events(dispatcher: Any, events: list[Any], producer: Any, routing_key: str) -> None:
    """``dispatcher._publish(events, producer, routing_key)``: publish ``events`` (made by
    :func:`prepare_event`) as one grouped event message (``task.multi``), as Celery's own worker does.

    docs/architecture.md, "The modules, in detail" (compat/celery.py, publish_events).
    """
    dispatcher._publish(events, producer, routing_key)


def crontab_as_written(value: Any, field: str) -> Any:
    """The ``field`` of the Celery ``crontab`` ``value`` as it was written (``'*/15'``,
    ``'mon-fri'``, an int, a set...): its attribute ``_orig_<field>`` for ``field`` one of
    ``minute``, ``hour``, ``day_of_month``, ``month_of_year``, ``day_of_week``.

    docs/architecture.md, "The modules, in detail" (compat/celery.py, crontab_as_written).
    """
    return getattr(value, f"_orig_{field}")


def selected_queues(queues: Any) -> Any:
    """``queues._consume_from``: the queues a worker's ``-Q`` (``app.amqp.queues.select``) chose, or
    None when none was given (the public ``consume_from`` then answers the default queues, so it
    cannot tell the two apart)."""
    return queues._consume_from
