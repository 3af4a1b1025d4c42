"""``install(app)``: put alma-schedule's tasks and routes on an EXISTING Celery app: the whole integration.

Settings: those given (``install(app, settings=...)``), else the app's own ``alma_*`` keys
(``app.conf.alma_database_url``, ...) with the ``ALMA_*`` variables over them, read and validated
ONLY where our code runs (our CLI, a worker serving our queues, our tasks). ``install`` itself
reads nothing but our three queue names, unvalidated, for the routes: importing the fleet's app,
or calling ``.delay()`` from its web process, never fails because of our settings. Sends go through
this app (its broker, its routing): no ``ALMA_BROKER_URL``, and no ``ALMA_CELERY_APP`` (the
``task`` kind sends through this app).

What it does to the app, and nothing else:

* registers ``alma_schedule.tick``, ``alma_schedule.run``, ``alma_schedule.run_many`` and
  ``alma_schedule.collect`` (``shared=False``: they appear on this app only), each pinning
  ``acks_late=False``, ``reject_on_worker_lost=False``, ``retry_on_worker_lost=False`` and
  ``serializer='json'`` whatever the app's defaults;
* merges their routes into ``task_routes`` (name -> ``*_queue``), keeping every route the
  app already has: an app route for one of our names wins, routers given as a list keep their
  order after ours; the merge is redone whenever the app (re)loads its configuration;
* adds a worker bootstep (:mod:`alma_schedule.tasks.bootstep`): a worker serving one of our queues
  validates our settings, refuses an ``accept_content`` other than JSON and a production store with
  the ``memory://`` broker, sets our tasks' time limits, and (run or collect queue) checks that
  every kind stored can be served; else it refuses to start with one line naming the setting;
* adds a consumer bootstep guarding Celery's answers to poison (:mod:`alma_schedule.tasks.dead_letter`):
  a message of our queues that is no well-formed call of our task is refused, counted and
  republished to ``dead_queue``, and never stops the worker.
* with ``beat_clock=True``, connects a ``beat_init`` receiver that makes ``celery -A <app> beat``
  the clock (one ``alma_schedule.tick`` entry; :mod:`alma_schedule.tasks.beat_clock`).

What it cannot change for you (app-wide settings it leaves alone):

* ``accept_content`` is app-wide: our queues must be served by workers whose app refuses pickle
  (``accept_content=['json']``; such a worker refuses to start otherwise); our messages are JSON.
* ``worker_prefetch_multiplier``, events (``worker_send_task_events``, ``task_send_sent_event``)
  and the broker are yours; ticks need a worker of their own (``-Q alma.tick -c 1``) or they wait
  behind long tasks; run and collect need workers started with ``-Q alma.run,alma.collect``.
* It never makes any app the current app and never touches ``task_queues``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import ConfigurationError
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, TICK_TASK
from alma_schedule.tasks.bootstep import KindCheckStep
from alma_schedule.tasks.composition import Composition, bind, composition_of
from alma_schedule.tasks.dead_letter import GuardStep
from alma_schedule.tasks.definitions import define_tasks

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

    ``settings`` defaults to the app's ``alma_*`` keys and the ``ALMA_*`` variables, read lazily
    (see the module docstring). ``registry`` defaults to a :class:`KindRegistry` of built-in and
    entry-point kinds, whose ``task`` kind sends through ``app``. Installing twice on one app is a
    :class:`ConfigurationError`. ``beat_clock=True`` makes ``celery -A <app> beat`` the clock (one
    ``alma_schedule.tick`` entry; beat refuses to start while its ``beat_schedule`` holds entries
    ``import-beat`` converts, or under another scheduler class unless ``keep_beat_entries=True``):
    see :mod:`alma_schedule.tasks.beat_clock`.
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
    app.steps["consumer"].add(GuardStep)
    return composition
