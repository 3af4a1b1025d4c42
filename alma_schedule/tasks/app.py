"""The ready app: a new Celery app (never current, never default) with our tasks, routes and queues.

docs/architecture.md, section "The modules, in detail" (tasks/app.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alma_schedule.errors import ConfigurationError, ProcessRefused, missing_extra

try:
    from celery import Celery
except ModuleNotFoundError as exc:  # a bare install: no Celery
    raise missing_extra(exc, "celery", "the Celery face") from None

from alma_schedule.tasks.composition import composition_of
from alma_schedule.tasks.install import install_on, our_routes

if TYPE_CHECKING:
    from alma_schedule.runners.registry import KindRegistry
    from alma_schedule.settings import Settings

__all__ = ["ReadyApp", "celery_app_for", "create_app", "ready_app_config"]


class ReadyApp(Celery):
    """The ready app's class: a :class:`Celery` whose every send (``celery call``, ``.delay()``, our
    dispatcher) first refuses a production store with the ``memory://`` broker, naming
    ``ALMA_DATABASE_URL`` and ``ALMA_BROKER_URL`` in one line: such a message would be lost."""

    def send_task(self, name: str, *args: Any, **kwargs: Any) -> Any:
        composition = composition_of(self)
        if composition is not None:
            from alma_schedule.settings import refuse_lost_sends

            try:
                refuse_lost_sends(composition.settings, str(self.conf.broker_url or ""))
            except ConfigurationError as exc:
                raise ProcessRefused.of(exc) from None
        return super().send_task(name, *args, **kwargs)


def ready_app_config(settings: Settings) -> dict[str, Any]:
    """The configuration of the ready app (plain Celery settings)."""
    from kombu.entity import Exchange, Queue

    queues = (settings.tick_queue, settings.run_queue, settings.collect_queue)
    return {
        "broker_url": settings.broker_url,
        "result_backend": settings.result_backend,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "event_serializer": "json",
        "task_routes": our_routes(settings),
        "task_queues": tuple(
            Queue(name, Exchange(name), routing_key=name)  # type: ignore[no-untyped-call]
            for name in queues
        ),
        "task_default_queue": settings.run_queue,
        "worker_send_task_events": settings.task_events,
        "task_send_sent_event": settings.task_events,
        "worker_prefetch_multiplier": 1,
        "broker_connection_retry_on_startup": True,
        "enable_utc": True,
        "timezone": "UTC",
    }


def create_app(
    settings: Settings | None = None, *, registry: KindRegistry | None = None, main: str = "alma_schedule"
) -> Celery:
    """A new ready app (not current, not default) with our tasks installed.

    ``settings`` defaults to :func:`alma_schedule.settings.load_settings` (the environment).
    """
    from alma_schedule.settings import load_settings

    settings = settings if settings is not None else load_settings()
    new = ReadyApp(main, set_as_current=False)
    new.conf.update(ready_app_config(settings))
    install_on(new, settings=settings, registry=registry, fleet=False)
    return new


def celery_app_for(settings: Settings) -> Celery:
    """A ready app (not current) for ``settings``, for processes that only send (the CLI's tick)."""
    return create_app(settings)
