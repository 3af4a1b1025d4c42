"""Poison messages: anything on our queues that is not a well-formed call of our task is refused.

docs/architecture.md, section "The modules, in detail" (tasks/poison.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery.exceptions import InvalidTaskError
from celery.worker.request import Request
from celery.worker.strategy import default as default_strategy
from kombu.exceptions import DecodeError

from alma_schedule.tasks.dead_letter import refused_total
from alma_schedule.tasks.message_shape import body_problem, header_problem, signature_spec

if TYPE_CHECKING:
    from collections.abc import Callable

    from celery import Celery


def _payload(message: Any) -> Any:
    try:
        return message.payload
    except DecodeError as exc:
        raise InvalidTaskError(f"the body does not decode: {type(exc).__name__}") from None


class CheckedRequest(Request):
    """Celery's ``Request``, refusing (``InvalidTaskError``) a message that is not a call of its task."""

    def __init__(
        self,
        message: Any,
        *args: Any,
        task: Any = None,
        body: Any = None,
        headers: Any = None,
        decoded: bool = False,
        **kwargs: Any,
    ) -> None:
        name = str(getattr(task, "name", ""))
        problem = header_problem(message.headers if headers is None else headers, name)
        if problem is None and task is not None:
            payload = (message.body if body is None else body) if decoded else _payload(message)
            problem = body_problem(name, signature_spec(task.run), payload)
        if problem is not None:
            raise InvalidTaskError(problem)
        super().__init__(message, *args, task=task, body=body, headers=headers, decoded=decoded, **kwargs)


def strategy(task: Any, app: Celery, consumer: Any, **options: Any) -> Callable[..., Any]:
    """Celery's default strategy for ``task``, refusing first a body its own code cannot probe."""
    handler: Callable[..., Any] = default_strategy(task, app, consumer, **options)

    def on_message(message: Any, body: Any, *args: Any, **kwargs: Any) -> Any:
        if body is None:  # protocol 2: the default handler runs `'args' in message.payload`
            payload = _payload(message)
            if not isinstance(payload, (list, tuple, dict)):
                raise InvalidTaskError(f"the body is {type(payload).__name__}, not [args, kwargs, embed]")
        return handler(message, body, *args, **kwargs)

    return on_message


__all__ = ["CheckedRequest", "refused_total", "strategy"]
