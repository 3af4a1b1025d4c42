"""The Celery face's inside: the ready app, install, the tasks, the dispatcher and the composition root.

docs/architecture.md, section "The modules, in detail" (tasks/__init__.py).
"""

from __future__ import annotations

from alma_schedule.tasks.app import celery_app_for, create_app, ready_app_config
from alma_schedule.tasks.bootstep import KindCheckStep
from alma_schedule.tasks.composition import AlmaTasks, Composition, composition_of
from alma_schedule.tasks.definitions import define_tasks, parse_now
from alma_schedule.tasks.dispatcher import CeleryDispatcher, queue_depth
from alma_schedule.tasks.install import install, merge_routes, our_routes

__all__ = [
    "AlmaTasks",
    "CeleryDispatcher",
    "Composition",
    "KindCheckStep",
    "celery_app_for",
    "composition_of",
    "create_app",
    "define_tasks",
    "install",
    "merge_routes",
    "our_routes",
    "parse_now",
    "queue_depth",
    "ready_app_config",
]
