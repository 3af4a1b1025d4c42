"""The schedule engine: register, the levers, plan, tick, execute, collect and record.

Plain Python over the store protocol and the scheduling core: no Celery and no SQL inside. The
Celery tasks are thin calls into :class:`Scheduler`; the embedded mode calls it directly.
"""

from __future__ import annotations

from typing import Any

from alma_schedule.deprecation import resolve_alias

from .decide import decide
from .dispatch import InProcessDispatcher
from .handle import StoreRunHandle
from .register import RegistrationReceipt
from .revision import config_revision
from .runtime import UnknownKind
from .scheduler import Scheduler, create_schedule, create_scheduler

__all__ = [
    "InProcessDispatcher",
    "RegistrationReceipt",
    "Scheduler",
    "StoreRunHandle",
    "UnknownKind",
    "config_revision",
    "create_schedule",
    "create_scheduler",
    "decide",
]


#: 0.1.0's name of :class:`Scheduler` (deprecated alias, one release).
_ALIASES = {"Schedule": ("alma_schedule.engine", "Scheduler")}


def __getattr__(name: str) -> Any:
    return resolve_alias(__name__, name, _ALIASES)
