"""The Celery adapter: ``install`` for an existing fleet, and ``app``, the ready app.

``app`` (also reachable as ``celery``, the names ``celery -A alma_schedule.celery`` looks for) is
built on first attribute access, from the ``ALMA_*`` settings, and NEVER becomes the current or
default Celery app: a fleet that imports :func:`install` from here keeps its own ``shared_task``
routing. Importing this module builds nothing.

The ready app: broker and result backend from settings; JSON only (tasks, results, events;
pickle refused); routes of our tasks to ``alma.tick`` / ``alma.run`` (run, run_many) / ``alma.collect``
(settings), which are also its declared queues, so a worker with no ``-Q`` serves all three (run
ticks on a worker of their own all the same: ``-Q alma.tick -c 1``); task events per
``ALMA_TASK_EVENTS``; ``worker_prefetch_multiplier=1``; broker connection retried on start-up.

A fleet with its own app calls ``install(app, settings=...)``; ``install(app, settings=...,
beat_clock=True)`` also makes the fleet's ``celery -A <app> beat`` the clock (see
:mod:`alma_schedule.tasks.beat_clock`).

Examples::

    celery -A alma_schedule.celery worker -Q alma.tick -c 1 -E
    celery -A alma_schedule.celery worker -Q alma.run,alma.collect
    celery -A alma_schedule.celery call alma_schedule.tick --expires 55     # a crontab line
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from alma_schedule.tasks.app import create_app, ready_app_config
from alma_schedule.tasks.install import install

if TYPE_CHECKING:
    from celery import Celery

__all__ = ["create_app", "install", "ready_app_config"]  # `app` is lazy: module __getattr__

_lock = threading.Lock()
_app: Celery | None = None


def __getattr__(name: str) -> Any:
    if name in ("app", "celery"):
        global _app
        with _lock:
            if _app is None:
                _app = create_app()
            return _app
    raise AttributeError(f"module 'alma_schedule.celery' has no attribute {name!r}")
