"""``install(app)``: put alma-schedule's tasks and routes on an existing Celery app: the whole integration.

docs/architecture.md, section "The modules, in detail" (tasks/install.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import ConfigurationError
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, TICK_TASK
from alma_schedule.model.names import ALERT_TASK
from alma_schedule.tasks.bootstep import KindCheckStep  # its module connects worker_init (a plain worker's queues)
from alma_schedule.tasks.composition import Composition, bind, composition_of
from alma_schedule.tasks.dead_letter import GuardStep
from alma_schedule.tasks.definitions import define_tasks
from alma_schedule.tasks.raw_guard import RawGuardStep

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.runners.registry import KindRegistry
    from alma_schedule.settings import Settings


def our_routes(settings: Settings | Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``task_routes`` entries for our task names (queues from settings, or a mapping of the three
    queue names as :func:`alma_schedule.settings.queue_names` returns)."""
    names = (
        settings
        if isinstance(settings, Mapping)
        else {
            "tick_queue": settings.tick_queue,
            "run_queue": settings.run_queue,
            "collect_queue": settings.collect_queue,
        }
    )
    return {
        TICK_TASK: {"queue": names["tick_queue"]},
        RUN_TASK: {"queue": names["run_queue"]},
        RUN_MANY_TASK: {"queue": names["run_queue"]},
        COLLECT_TASK: {"queue": names["collect_queue"]},
        ALERT_TASK: {"queue": names["collect_queue"]},
    }


def merge_routes(existing: Any, ours: Mapping[str, Any]) -> Any:
    """``existing`` task_routes with ``ours`` added: a dict keeps its own entries for our names;
    a list or tuple of routers gets ours first (exact names only, so nothing else changes); a
    single router becomes ``(ours, router)``."""
    if existing is None:
        return dict(ours)
    if isinstance(existing, Mapping):
        merged = dict(ours)
        merged.update(existing)
        return merged
    if isinstance(existing, (list, tuple)):
        rest = [r for r in existing if not _is_ours(r, ours)]
        return (dict(ours), *rest)
    if _is_ours(existing, ours):
        return existing
    return (dict(ours), existing)


def _is_ours(router: Any, ours: Mapping[str, Any]) -> bool:
    return isinstance(router, Mapping) and dict(router) == dict(ours)


def _apply_routes(app: Celery, conf: Any, settings: Settings | None) -> None:
    from alma_schedule.settings import queue_names

    ours = our_routes(settings if settings is not None else queue_names(conf=conf))
    conf["task_routes"] = merge_routes(conf.get("task_routes"), ours)
    amqp = app.__dict__.get("amqp")  # only if the app already built its router (else nothing cached)
    if amqp is not None:
        amqp.flush_routes()
        amqp.__dict__.pop("router", None)


def install(
    app: Celery,
    *,
    settings: Settings | None = None,
    registry: KindRegistry | None = None,
    beat_clock: bool = False,
    keep_beat_entries: bool = False,
) -> Composition:
    """Register our tasks, routes and start-up check on ``app``; return its :class:`Composition`.

    docs/architecture.md, "The modules, in detail" (tasks/install.py, install).
    """
    if keep_beat_entries and not beat_clock:
        raise ConfigurationError("install(app, keep_beat_entries=True) applies only with beat_clock=True")
    composition = install_on(app, settings=settings, registry=registry, fleet=True)
    if beat_clock:
        from alma_schedule.tasks.beat_clock import connect_beat_clock

        connect_beat_clock(app, lambda: composition.settings, keep_beat_entries=keep_beat_entries)
    return composition


def install_on(app: Celery, *, settings: Settings | None, registry: KindRegistry | None, fleet: bool) -> Composition:
    """:func:`install`; ``fleet=False`` for the ready app (whose ``task`` kind needs ``ALMA_CELERY_APP``)."""
    if composition_of(app) is not None:
        raise ConfigurationError(f"alma_schedule is already installed on the Celery app {app.main!r}")
    composition = Composition(app, settings, registry=registry, fleet=fleet)
    composition.tasks = define_tasks(app, composition, settings)
    bind(app, composition)

    def on_configure(sender: Any = None, source: Any = None, **_: Any) -> None:
        if sender is app and source is not None:
            _apply_routes(app, source, settings)

    app.on_after_configure.connect(on_configure, weak=False)
    if app.configured:
        _apply_routes(app, app.conf, settings)
    app.steps["worker"].add(KindCheckStep)
    app.steps["worker"].add(RawGuardStep)
    app.steps["consumer"].add(GuardStep)
    return composition
