"""alma-schedule: the clock of a Celery fleet, as a tick.

``import alma_schedule`` imports no Celery: the Celery adapter is :mod:`alma_schedule.celery`.
Public names are loaded lazily on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # errors
    "AlmaScheduleError": "alma_schedule.errors",
    "ConfigurationError": "alma_schedule.errors",
    "InvalidSchedule": "alma_schedule.errors",
    "InvalidInput": "alma_schedule.errors",
    "RegistrationRefused": "alma_schedule.errors",
    "NotFound": "alma_schedule.errors",
    "Refused": "alma_schedule.errors",
    "Overlap": "alma_schedule.errors",
    "StoreError": "alma_schedule.errors",
    "StoreUnavailable": "alma_schedule.errors",
    "StoreConflict": "alma_schedule.errors",
    "SchemaMismatch": "alma_schedule.errors",
    # contracts
    "Scope": "alma_schedule.contracts",
    "Routine": "alma_schedule.contracts",
    "RoutineSpec": "alma_schedule.contracts",
    "RoutineKey": "alma_schedule.contracts",
    "RunKey": "alma_schedule.contracts",
    "RunRecord": "alma_schedule.contracts",
    "RunResult": "alma_schedule.contracts",
    "RunState": "alma_schedule.contracts",
    "Reason": "alma_schedule.contracts",
    "ClaimResult": "alma_schedule.contracts",
    "ClaimBatch": "alma_schedule.contracts",
    "Fire": "alma_schedule.contracts",
    "Defer": "alma_schedule.contracts",
    "NotDue": "alma_schedule.contracts",
    "Ceiling": "alma_schedule.contracts",
    "TickPlan": "alma_schedule.contracts",
    "TickReport": "alma_schedule.contracts",
    "RunHandle": "alma_schedule.contracts",
    "RoutineRunner": "alma_schedule.contracts",
    "Dispatcher": "alma_schedule.contracts",
    # settings
    "Settings": "alma_schedule.settings",
    "load_settings": "alma_schedule.settings",
    "Timers": "alma_schedule.settings",
    # scheduling core
    "Cron": "alma_schedule.core",
    "Every": "alma_schedule.core",
    "At": "alma_schedule.core",
    "parse_schedule": "alma_schedule.core",
    "validate_schedule": "alma_schedule.core",
    "latest_fire": "alma_schedule.core",
    "next_fire": "alma_schedule.core",
    "fire_id": "alma_schedule.core",
    # stores
    "Store": "alma_schedule.stores.base",
    "MemoryStore": "alma_schedule.stores.memory",
    "SqlStore": "alma_schedule.stores.sql",
    "migrate_store": "alma_schedule.stores.sql",
    "open_store": "alma_schedule.stores",
    # engine
    "Schedule": "alma_schedule.engine",
    "create_schedule": "alma_schedule.engine",
    "InProcessDispatcher": "alma_schedule.engine",
    "RegistrationReceipt": "alma_schedule.engine",
    # governed runners
    "create_governed_conversation_runner": "alma_schedule.governed",
    "create_governed_batch_runner": "alma_schedule.governed",
    "ConversationProvider": "alma_schedule.governed",
    "BatchProvider": "alma_schedule.governed",
    "Sink": "alma_schedule.governed",
    "governed_key": "alma_schedule.ids",
    # adapters
    "OpenAICompatibleProvider": "alma_schedule.adapters.openai",
    "WebhookSink": "alma_schedule.adapters.webhook",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'alma_schedule' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
