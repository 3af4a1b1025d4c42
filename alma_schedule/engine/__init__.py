"""The schedule engine: register, the levers, plan, tick, execute, collect and record.

Plain Python over the store protocol and the scheduling core: no Celery and no SQL inside. The
Celery tasks are thin calls into :class:`Schedule`; the embedded mode calls it directly.
"""

from __future__ import annotations

from .decide import decide
from .dispatch import InProcessDispatcher
from .handle import StoreRunHandle
from .register import RegistrationReceipt
from .revision import config_revision
from .runtime import UnknownKind
from .schedule import Schedule, create_schedule

__all__ = [
    "InProcessDispatcher",
    "RegistrationReceipt",
    "Schedule",
    "StoreRunHandle",
    "UnknownKind",
    "config_revision",
    "create_schedule",
    "decide",
]
