"""The composition root of a Celery process: store, kind registry, dispatcher and Scheduler.

docs/architecture.md, section "The modules, in detail" (tasks/composition.py).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import missing_extra

try:
    from celery.signals import worker_process_init, worker_process_shutdown
except ModuleNotFoundError as exc:  # a bare install: no Celery
    raise missing_extra(exc, "celery", "the Celery face") from None

from alma_schedule.runners.registry import BUILTIN_KINDS, KindRegistry, stored_kinds
from alma_schedule.tasks.bound import bind as bind_app
from alma_schedule.tasks.bound import bound_to

if TYPE_CHECKING:
    from celery import Celery, Task

    from alma_schedule.engine import Scheduler
    from alma_schedule.model import RoutineRunner
    from alma_schedule.settings import Settings
    from alma_schedule.stores.base import Store

log = logging.getLogger(__name__)

_ALL: weakref.WeakSet[Composition] = weakref.WeakSet()


@dataclass(frozen=True)
class AlmaTasks:
    """The tasks :func:`define_tasks` registered on one app."""

    tick: Task
    run: Task
    collect: Task
    run_many: Task


class Composition:
    """The parts one process needs to serve the tasks of one app. Thread-safe, built lazily."""

    def __init__(
        self,
        app: Celery,
        settings: Settings | None = None,
        *,
        registry: KindRegistry | None = None,
        fleet: bool = True,
    ) -> None:
        self._app_ref = weakref.ref(app)
        self._settings = settings
        self._given = settings is not None
        #: Installed on a fleet's own app (``install``), not on the ready app (``create_app``).
        self.fleet = fleet
        self._registry = registry
        if registry is not None:
            self._serve_task_kind(registry)
        self.tasks: AlmaTasks | None = None
        self._lock = threading.RLock()
        self._store: Store | None = None
        self._store_pid = os.getpid()
        self._schedule: Scheduler | None = None
        self.checked: list[str] | None = None
        #: store connections this process's tasks may use at once: a worker whose pool runs tasks in
        #: threads (``-P threads``, gevent, eventlet) sets its concurrency (``bootstep.KindCheckStep``)
        self.connections: int | None = None
        _ALL.add(self)

    @property
    def app(self) -> Celery:
        app = self._app_ref()
        if app is None:  # pragma: no cover - the app owns its tasks, which own us
            raise RuntimeError("the Celery app of this composition is gone")
        return app

    @property
    def settings(self) -> Settings:
        """The settings given to ``install``, else read (and validated) once, on first use, from the
        app's ``alma_*`` keys and the ``ALMA_*`` variables."""
        with self._lock:
            if self._settings is None:
                from alma_schedule.settings import load_settings

                self._settings = load_settings(conf=self.app.conf)
            return self._settings

    @property
    def given_settings(self) -> Settings | None:
        """The settings given to ``install`` (None: read lazily from the app and the environment)."""
        return self._settings if self._given else None

    @property
    def registry(self) -> KindRegistry:
        """The kind registry (given to ``install``, else built over :attr:`settings` on first use)."""
        with self._lock:
            if self._registry is None:
                registry = KindRegistry(self.settings)
                self._serve_task_kind(registry)
                self._registry = registry
            return self._registry

    def _serve_task_kind(self, registry: KindRegistry) -> None:
        if self.fleet and registry.sources().get("task") == BUILTIN_KINDS["task"]:
            registry.register("task", self._task_runner)

    def _task_runner(self, settings: Settings) -> RoutineRunner:
        """The ``task`` kind on a fleet's app: that app, unless ``ALMA_CELERY_APP`` names another."""
        from alma_schedule.policies.allow import TaskAllow
        from alma_schedule.runners.task import TaskRunner, from_settings

        if settings.celery_app:
            return from_settings(settings)
        return TaskRunner(self.app, allow=TaskAllow.from_settings(settings), collect_queue=settings.collect_queue)

    def store(self) -> Store:
        """The store of ``settings.database_url``, opened once per process."""
        with self._lock:
            if self._store is None:
                from alma_schedule.stores import open_store

                self._store = open_store(
                    self.settings.database_url, schema=self.settings.database_schema, connections=self.connections
                )
                self._store_pid = os.getpid()
            return self._store

    def schedule(self) -> Scheduler:
        """The engine over the store, the registry (as resolver) and a :class:`CeleryDispatcher`."""
        with self._lock:
            if self._schedule is None:
                from alma_schedule.engine import create_scheduler
                from alma_schedule.tasks.dispatcher import CeleryDispatcher

                self._schedule = create_scheduler(
                    store=self.store(),
                    runner=self.registry.resolve,
                    dispatcher=CeleryDispatcher(self.app, self.settings),
                    settings=self.settings,
                )
            return self._schedule

    def check(self) -> list[str]:
        """Refuse (:class:`ConfigurationError`, naming the missing setting) when a kind present in
        the store cannot be served by this configuration. Returns the kinds checked."""
        kinds = self.registry.check(stored_kinds(self.store()))
        self.checked = kinds
        return kinds

    def after_fork(self) -> None:
        """In a freshly forked child: drop the parent's pooled connections and built runners.

        ``worker_process_init`` also fires in pools that do not fork (``solo``): then, in the
        process that opened the store, nothing is dropped.
        """
        with self._lock:
            if self._store is None or self._store_pid == os.getpid():
                return
            store, self._store, self._schedule = self._store, None, None
            if self._registry is not None:
                self._registry.forget_runners()
        dispose = getattr(store, "dispose", None)
        if callable(dispose):
            # Forget (never close) the parent's sockets; the child opens its own small pool on
            # first use with a new store object.
            dispose()

    def close(self) -> None:
        """Release the store's connections (tests, a worker shutting down)."""
        with self._lock:
            store, self._store, self._schedule = self._store, None, None
        if store is not None:
            store.close()


def bind(app: Celery, composition: Composition) -> None:
    """Make ``composition`` the one :func:`composition_of` returns for ``app``."""
    bind_app(app, composition)


def composition_of(app: Celery) -> Composition | None:
    """The composition :func:`alma_schedule.celery.install` made for ``app`` (None if not installed)."""
    found = bound_to(app)
    return found if isinstance(found, Composition) else None


def our_queue_names(composition: Composition) -> dict[str, str]:
    """Our three queue names, without validating any setting (those given to ``install``, else peeked)."""
    given = composition.given_settings
    if given is not None:
        return {"tick_queue": given.tick_queue, "run_queue": given.run_queue, "collect_queue": given.collect_queue}
    from alma_schedule.settings import queue_names

    return queue_names(conf=composition.app.conf)


@worker_process_init.connect(weak=False)
def _after_fork(**_: Any) -> None:
    for composition in list(_ALL):
        composition.after_fork()


@worker_process_shutdown.connect(weak=False)
def _on_exit(**_: Any) -> None:
    for composition in list(_ALL):
        if composition._store_pid == os.getpid():  # close only what this process opened
            composition.close()


__all__ = ["AlmaTasks", "Composition", "bind", "composition_of", "our_queue_names"]
