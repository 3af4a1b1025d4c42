"""Deprecated (removed in 0.3.0): 0.1.0's ``alma_schedule.contracts`` moved to :mod:`alma_schedule.model`.

Every public name of the new home resolves here with a :class:`DeprecationWarning` naming it.
Nothing is imported until a name is asked for.
"""

from __future__ import annotations

from typing import Any

from alma_schedule.deprecation import resolve_alias

#: The names 0.1.0 had here; each now lives in :mod:`alma_schedule.model`.
NAMES = frozenset(
    {
        "ACTIVE",
        "ANNOTATABLE",
        "COLLECT_TASK",
        "Ceiling",
        "ClaimBatch",
        "ClaimResult",
        "Decision",
        "Defer",
        "Deferral",
        "Dispatcher",
        "EDGES",
        "Fire",
        "NON_TERMINAL",
        "NotDue",
        "PlannedFire",
        "PlannedRoutine",
        "REASONS",
        "RUN_MANY_TASK",
        "RUN_TASK",
        "Reason",
        "Resends",
        "ReserveResult",
        "Routine",
        "RoutineKey",
        "RoutineRunner",
        "RoutineSpec",
        "RoutineVersion",
        "RunHandle",
        "RunKey",
        "RunRecord",
        "RunResult",
        "RunState",
        "Scope",
        "TERMINAL",
        "TICK_TASK",
        "TickError",
        "TickPlan",
        "TickReport",
    }
)


def __getattr__(name: str) -> Any:
    return resolve_alias(__name__, name, {n: ("alma_schedule.model", n) for n in NAMES})
