"""The ``task`` runner's side of the allow-list (:mod:`alma_schedule.policies.allow`): which queue a
send would reach, asked of the fleet's app, and the one refusal line for a definition.

docs/architecture.md, section "The modules, in detail" (runners/task_allow.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from alma_schedule.policies.allow import TaskAllow

if TYPE_CHECKING:
    from celery import Celery

__all__ = ["destination", "refusal"]


def destination(
    app: Celery, task: str, options: Mapping[str, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> str | None:
    """The queue a send of ``task`` with ``options`` reaches: ``options['queue']``, else the app's
    route for it; None when the app's routing cannot tell."""
    queue = options.get("queue")
    if isinstance(queue, str):
        return queue
    try:
        routed = app.amqp.router.route({}, task, list(args), dict(kwargs))
    except Exception:  # the send routes the same way and fails the run: nothing is sent either way
        return None
    found = routed.get("queue")
    name = getattr(found, "name", found)
    return name if isinstance(name, str) else None


def refusal(
    app: Celery,
    allow: TaskAllow,
    task: str,
    options: Mapping[str, Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
) -> str | None:
    """Why ``allow`` refuses this send (one line naming the task or queue and the setting), or None."""
    found = allow.task_refusal(task)
    if found is not None:
        return found
    queue = destination(app, task, options, args, kwargs or {})
    return None if queue is None else allow.queue_refusal(queue)
