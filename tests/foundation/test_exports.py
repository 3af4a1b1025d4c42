"""The root package's documented exports are pinned; 0.1.0's other root names warn and still resolve."""

from __future__ import annotations

import subprocess
import sys

import pytest

import alma_schedule

DOCUMENTED = [
    "AlmaScheduleError",
    "At",
    "ConfigurationError",
    "Cron",
    "Every",
    "InvalidInput",
    "InvalidSchedule",
    "MemoryStore",
    "NotFound",
    "Overlap",
    "Refused",
    "RoutineSpec",
    "RunResult",
    "Scheduler",
    "Scope",
    "Settings",
    "SqlStore",
    "create_schedule",
    "create_scheduler",
    "load_settings",
    "migrate_store",
    "next_fire",
    "open_store",
    "parse_schedule",
]

#: Every name 0.1.0's root exported that is not documented any more, and where it lives now.
MOVED = {
    "RegistrationRefused": "alma_schedule.errors",
    "StoreError": "alma_schedule.errors",
    "StoreUnavailable": "alma_schedule.errors",
    "StoreConflict": "alma_schedule.errors",
    "SchemaMismatch": "alma_schedule.errors",
    "Routine": "alma_schedule.model",
    "RoutineKey": "alma_schedule.model",
    "RunKey": "alma_schedule.model",
    "RunRecord": "alma_schedule.model",
    "RunState": "alma_schedule.model",
    "Reason": "alma_schedule.model",
    "ClaimResult": "alma_schedule.model",
    "ClaimBatch": "alma_schedule.model",
    "Fire": "alma_schedule.model",
    "Defer": "alma_schedule.model",
    "NotDue": "alma_schedule.model",
    "Ceiling": "alma_schedule.model",
    "TickPlan": "alma_schedule.model",
    "TickReport": "alma_schedule.model",
    "RunHandle": "alma_schedule.model",
    "RoutineRunner": "alma_schedule.model",
    "Dispatcher": "alma_schedule.model",
    "governed_key": "alma_schedule.model",
    "Timers": "alma_schedule.settings",
    "validate_schedule": "alma_schedule.core",
    "latest_fire": "alma_schedule.core",
    "fire_id": "alma_schedule.core",
    "Store": "alma_schedule.stores.base",
    "InProcessDispatcher": "alma_schedule.engine",
    "RegistrationReceipt": "alma_schedule.engine",
    "create_governed_conversation_runner": "alma_schedule.runners.governed",
    "create_governed_batch_runner": "alma_schedule.runners.governed",
    "ConversationProvider": "alma_schedule.runners.governed",
    "BatchProvider": "alma_schedule.runners.governed",
    "Sink": "alma_schedule.runners.governed",
    "OpenAICompatibleProvider": "alma_schedule.runners.adapters.openai",
    "WebhookSink": "alma_schedule.runners.adapters.webhook",
}


def test_the_documented_exports_are_exactly_these() -> None:
    assert alma_schedule.__all__ == ["__version__", *sorted(DOCUMENTED)]
    assert dir(alma_schedule) == sorted(alma_schedule.__all__)


@pytest.mark.parametrize("name", DOCUMENTED)
def test_each_documented_export_resolves_without_a_warning(name: str) -> None:
    assert getattr(alma_schedule, name) is not None  # filterwarnings=error: a warning would fail here


@pytest.mark.parametrize("name", sorted(MOVED))
def test_each_moved_name_warns_and_is_the_object_of_its_new_module(name: str) -> None:
    import importlib

    with pytest.warns(DeprecationWarning, match=MOVED[name]):
        old = getattr(alma_schedule, name)
    assert old is getattr(importlib.import_module(MOVED[name]), name)


def test_the_old_engine_name_is_the_scheduler() -> None:
    from alma_schedule.engine import Scheduler

    with pytest.warns(DeprecationWarning, match="Scheduler"):
        assert alma_schedule.Schedule is Scheduler
    with pytest.warns(DeprecationWarning, match="Scheduler"):
        from alma_schedule.engine import Schedule
    assert Schedule is Scheduler


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        alma_schedule.no_such_name  # noqa: B018


def test_resolving_every_name_imports_no_celery() -> None:
    code = (
        "import sys, warnings, alma_schedule\n"
        "warnings.simplefilter('ignore')\n"
        f"[getattr(alma_schedule, n) for n in {sorted(MOVED)!r} + alma_schedule.__all__]\n"
        "print('celery' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("alma_schedule.contracts", "alma_schedule.model"),
        ("alma_schedule.ids", "alma_schedule.model"),
        ("alma_schedule.governed", "alma_schedule.runners.governed"),
        ("alma_schedule.adapters", "alma_schedule.runners.adapters"),
    ],
)
def test_each_moved_module_still_resolves_its_names_with_a_warning(old: str, new: str) -> None:
    import importlib

    shim = importlib.import_module(old)  # importing it imports nothing and warns of nothing
    assert shim.NAMES
    target = importlib.import_module(new)
    for name in sorted(shim.NAMES):
        with pytest.warns(DeprecationWarning, match=new):
            assert getattr(shim, name) is getattr(target, name)
    with pytest.raises(AttributeError):
        shim.TICK_QUEUE  # noqa: B018  (0.1.0's dead constants are gone, not aliased)
