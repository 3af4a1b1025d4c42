"""Our queues run only our tasks: which of our queues a message came from, and :class:`OnlyOurs`,
the consumer's ``strategies`` that refuse (``InvalidTaskError``) a task not ours on them.

docs/architecture.md, section "The flow, from clock to ledger" (refused messages).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from celery.exceptions import InvalidTaskError

from alma_schedule.model import OUR_TASKS
from alma_schedule.tasks.composition import composition_of, our_queue_names

if TYPE_CHECKING:
    from celery import Celery


def queue_among(message: Any, ours: Collection[str]) -> str | None:
    """The queue among ``ours`` that ``message`` came from (its routing key or exchange), or None."""
    info = getattr(message, "delivery_info", None) or {}
    for key in ("routing_key", "exchange"):
        value = info.get(key)
        if isinstance(value, str) and value in ours:
            return value
    return None


def our_queue(app: Celery, message: Any) -> str | None:
    """The queue of ours ``message`` came from (its routing key or exchange), or None."""
    composition = composition_of(app)
    if composition is None:
        return None
    return queue_among(message, set(our_queue_names(composition).values()))


def not_ours(name: str, strategy: Callable[..., Any], ours: Collection[str]) -> Callable[..., Any]:
    """``strategy`` of the task ``name`` (not ours), refusing first a message of the queues ``ours``."""

    def on_message(message: Any, *args: Any, **kwargs: Any) -> Any:
        queue = queue_among(message, ours)
        if queue is not None:
            raise InvalidTaskError(f"the task {name[:120]!r} is not alma_schedule's: {queue} runs only our tasks")
        return strategy(message, *args, **kwargs)

    return on_message


class OnlyOurs(dict[Any, Any]):
    """The consumer's strategies by task name; a task that is not ours is refused on our queues."""

    def __init__(self, app: Celery, strategies: Mapping[Any, Any]) -> None:
        super().__init__(strategies)
        self.app = app
        self.ours: frozenset[str] | None = None  # our queue names, read at the first message

    def __getitem__(self, name: Any) -> Any:
        try:
            strategy = super().__getitem__(name)
        except TypeError:  # an unhashable task name: the consumer answers a KeyError as an unknown task
            raise KeyError(repr(name)[:120]) from None
        if name in OUR_TASKS:
            return strategy
        if self.ours is None:
            composition = composition_of(self.app)
            self.ours = frozenset(our_queue_names(composition).values()) if composition is not None else frozenset()
        return not_ours(str(name), strategy, self.ours) if self.ours else strategy


__all__ = ["OnlyOurs", "not_ours", "our_queue", "queue_among"]
