"""The composition root of a Celery process: store, kind registry, dispatcher and Scheduler.

One :class:`Composition` per app (made by :func:`alma_schedule.celery.install`). Its parts are
built lazily, once per process, on the first task (or by the worker's start-up check):

* the store, ``open_store(settings.database_url)``;
* the :class:`KindRegistry` (built-in kinds, entry points, programmatic registrations);
* a :class:`CeleryDispatcher` over the app, and the engine's ``Scheduler`` over all three.

Prefork: the worker's parent runs :meth:`Composition.check` (a bootstep, see
:class:`KindCheckStep`), which opens the store; each child, on ``worker_process_init``, disposes the
inherited SQL engine (its pooled connections belong to the parent) and forgets built runners, so
it opens its own small pool and its own runner clients.
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
    from celery import bootsteps
    from celery.signals import worker_process_init, worker_process_shutdown
except ModuleNotFoundError as exc:  # a bare install: no Celery
    raise missing_extra(exc, "celery", "the Celery face") from None

from alma_schedule.runners.registry import KindRegistry, stored_kinds

if TYPE_CHECKING:
    from celery import Celery, Task

    from alma_schedule.engine import Scheduler
    from alma_schedule.settings import Settings
    from alma_schedule.stores.base import Store

log = logging.getLogger(__name__)

_COMPOSITIONS: weakref.WeakKeyDictionary[Any, Composition] = weakref.WeakKeyDictionary()
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

    def __init__(self, app: Celery, settings: Settings, *, registry: KindRegistry | None = None) -> None:
        self._app_ref = weakref.ref(app)
        self.settings = settings
        self.registry = registry if registry is not None else KindRegistry(settings)
        self.tasks: AlmaTasks | None = None
        self._lock = threading.RLock()
        self._store: Store | None = None
        self._store_pid = os.getpid()
        self._schedule: Scheduler | None = None
        self.checked: list[str] | None = None
        _ALL.add(self)

    @property
    def app(self) -> Celery:
        app = self._app_ref()
        if app is None:  # pragma: no cover - the app owns its tasks, which own us
            raise RuntimeError("the Celery app of this composition is gone")
        return app

    def store(self) -> Store:
        """The store of ``settings.database_url``, opened once per process."""
        with self._lock:
            if self._store is None:
                from alma_schedule.stores import open_store

                self._store = open_store(self.settings.database_url, schema=self.settings.database_schema)
                self._store_pid = os.getpid()
            return self._store

    def schedule(self) -> Scheduler:
        """The engine over the store, the registry (as resolver) and a :class:`CeleryDispatcher`."""
        with self._lock:
            if self._schedule is None:
                from alma_schedule.engine import create_schedule
                from alma_schedule.tasks.dispatcher import CeleryDispatcher

                self._schedule = create_schedule(
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
            self.registry.forget_runners()
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
    _COMPOSITIONS[app] = composition


def composition_of(app: Celery) -> Composition | None:
    """The composition :func:`alma_schedule.celery.install` made for ``app`` (None if not installed)."""
    return _COMPOSITIONS.get(app)


@worker_process_init.connect(weak=False)
def _after_fork(**_: Any) -> None:
    for composition in list(_ALL):
        composition.after_fork()


@worker_process_shutdown.connect(weak=False)
def _on_exit(**_: Any) -> None:
    for composition in list(_ALL):
        if composition._store_pid == os.getpid():  # close only what this process opened
            composition.close()


def consumed_queues(worker: Any) -> set[str] | None:
    """The queue names a starting worker will consume (None: every queue the app declares)."""
    queues = worker.app.amqp.queues
    selected = getattr(queues, "consume_from", None)
    names = selected if selected else queues
    return {str(name) for name in names}


class KindCheckStep(bootsteps.Step):
    """Worker bootstep: a worker that serves our run or collect queue checks every stored kind
    before it starts, and refuses to start (:class:`ConfigurationError`) naming what is missing."""

    name = "alma_schedule.kind_check"
    label = "alma_schedule kind check"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        composition = composition_of(parent.app)
        if composition is None:
            return
        settings = composition.settings
        ours = {settings.run_queue, settings.collect_queue}
        queues = consumed_queues(parent) or set()
        if not ours & queues:
            log.debug("alma_schedule: this worker serves none of %s; no kind check", sorted(ours))
            return
        kinds = composition.check()
        log.info("alma_schedule: this worker serves the stored kinds %s", kinds or "(none yet)")


__all__ = ["AlmaTasks", "Composition", "KindCheckStep", "bind", "composition_of", "consumed_queues"]
