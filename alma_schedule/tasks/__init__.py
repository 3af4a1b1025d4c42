"""The Celery face: tasks, dispatcher, kind registry and the composition root.

Importing this package imports Celery; ``import alma_schedule`` alone does not. The ready app and
``install`` for existing fleets are in :mod:`alma_schedule.celery`.
"""

from __future__ import annotations

from alma_schedule.tasks.composition import Composition, KindCheckStep, composition_of
from alma_schedule.tasks.definitions import AlmaTasks, define_tasks, parse_now
from alma_schedule.tasks.dispatcher import CeleryDispatcher, queue_depth
from alma_schedule.tasks.install import install, merge_routes, our_routes
from alma_schedule.tasks.registry import (
    BUILTIN_KINDS,
    ENTRY_POINT_GROUP,
    KindRegistry,
    RunnerFactory,
    UnknownKindRunner,
    stored_kinds,
)

__all__ = [
    "BUILTIN_KINDS",
    "ENTRY_POINT_GROUP",
    "AlmaTasks",
    "CeleryDispatcher",
    "Composition",
    "KindCheckStep",
    "KindRegistry",
    "RunnerFactory",
    "UnknownKindRunner",
    "composition_of",
    "define_tasks",
    "install",
    "merge_routes",
    "our_routes",
    "parse_now",
    "queue_depth",
    "stored_kinds",
]
