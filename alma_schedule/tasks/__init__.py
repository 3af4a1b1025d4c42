"""The Celery face: tasks, dispatcher, kind registry and the composition root.

The names below are loaded lazily, on first access: the kind registry
(:mod:`alma_schedule.tasks.registry`) needs no Celery and serves the bare install's in-process
ticks; every other part needs the ``celery`` extra (without it, a one-line
:class:`~alma_schedule.errors.ConfigurationError` names it). The ready app and ``install`` for
existing fleets are in :mod:`alma_schedule.celery`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_EXPORTS: dict[str, str] = {
    "Composition": "composition",
    "KindCheckStep": "composition",
    "composition_of": "composition",
    "AlmaTasks": "definitions",
    "define_tasks": "definitions",
    "parse_now": "definitions",
    "CeleryDispatcher": "dispatcher",
    "queue_depth": "dispatcher",
    "install": "install",
    "merge_routes": "install",
    "our_routes": "install",
    "BUILTIN_KINDS": "registry",
    "ENTRY_POINT_GROUP": "registry",
    "KindRegistry": "registry",
    "RunnerFactory": "registry",
    "UnknownKindRunner": "registry",
    "stored_kinds": "registry",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'alma_schedule.tasks' has no attribute {name!r}")
    return getattr(importlib.import_module(f"alma_schedule.tasks.{module}"), name)


def __dir__() -> list[str]:
    return __all__
