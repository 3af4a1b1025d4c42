"""alma-schedule: the clock of a Celery fleet, as a tick.

docs/architecture.md, section "The modules, in detail" (__init__.py).
"""

from __future__ import annotations

import importlib
from typing import Any

from alma_schedule.deprecation import resolve_alias

#: The installed distribution's version, read from its metadata on first access (``__getattr__``).
__version__: str

#: The distribution's name (``[project] name``): where ``__version__`` is read from.
_DISTRIBUTION = "alma-schedule"

_EXPORTS: dict[str, str] = {
    # the engine
    "create_scheduler": "alma_schedule.engine",
    "create_schedule": "alma_schedule.engine",  # the name since 0.1.0, kept
    "Scheduler": "alma_schedule.engine",
    # what you register and what a runner returns
    "Scope": "alma_schedule.model",
    "RoutineSpec": "alma_schedule.model",
    "RunResult": "alma_schedule.model",
    # stores
    "open_store": "alma_schedule.stores",
    "migrate_store": "alma_schedule.stores.sql",
    "MemoryStore": "alma_schedule.stores.memory",
    "SqlStore": "alma_schedule.stores.sql",
    # schedules
    "Cron": "alma_schedule.core",
    "Every": "alma_schedule.core",
    "At": "alma_schedule.core",
    "parse_schedule": "alma_schedule.core",
    "next_fire": "alma_schedule.core",
    # settings
    "Settings": "alma_schedule.settings",
    "load_settings": "alma_schedule.settings",
    # errors (all of them: alma_schedule.errors)
    "AlmaScheduleError": "alma_schedule.errors",
    "ConfigurationError": "alma_schedule.errors",
    "InvalidInput": "alma_schedule.errors",
    "InvalidSchedule": "alma_schedule.errors",
    "NotFound": "alma_schedule.errors",
    "Overlap": "alma_schedule.errors",
    "Refused": "alma_schedule.errors",
}

#: Names 0.1.0 exported from the root that now live only in their own module: deprecated aliases
#: for one release (each access warns, naming the new place).
_MOVED: dict[str, tuple[str, str]] = {
    **{
        name: ("alma_schedule.errors", name)
        for name in ("RegistrationRefused", "StoreError", "StoreUnavailable", "StoreConflict", "SchemaMismatch")
    },
    **{
        name: ("alma_schedule.model", name)
        for name in (
            "Routine",
            "RoutineKey",
            "RunKey",
            "RunRecord",
            "RunState",
            "Reason",
            "ClaimResult",
            "ClaimBatch",
            "Fire",
            "Defer",
            "NotDue",
            "Ceiling",
            "TickPlan",
            "TickReport",
            "RunHandle",
            "RoutineRunner",
            "Dispatcher",
            "governed_key",
        )
    },
    "Timers": ("alma_schedule.settings", "Timers"),
    "validate_schedule": ("alma_schedule.core", "validate_schedule"),
    "latest_fire": ("alma_schedule.core", "latest_fire"),
    "fire_id": ("alma_schedule.core", "fire_id"),
    "Store": ("alma_schedule.stores.base", "Store"),
    "Schedule": ("alma_schedule.engine", "Scheduler"),
    "InProcessDispatcher": ("alma_schedule.engine", "InProcessDispatcher"),
    "RegistrationReceipt": ("alma_schedule.engine", "RegistrationReceipt"),
    **{
        name: ("alma_schedule.runners.governed", name)
        for name in (
            "create_governed_conversation_runner",
            "create_governed_batch_runner",
            "ConversationProvider",
            "BatchProvider",
            "Sink",
        )
    },
    "OpenAICompatibleProvider": ("alma_schedule.runners.adapters.openai", "OpenAICompatibleProvider"),
    "WebhookSink": ("alma_schedule.runners.adapters.webhook", "WebhookSink"),
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def _installed_version() -> str:
    """``[project] version`` as installed; ``0+unknown`` from a source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _installed_version()
        return value
    module = _EXPORTS.get(name)
    if module is None:
        return resolve_alias("alma_schedule", name, _MOVED)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
