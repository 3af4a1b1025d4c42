"""The vocabulary: keys, routines, runs and their states, reasons, tick shapes, task names, time.

One module per concept; everything is plain data (frozen dataclasses with ``to_dict()``) or a
Protocol. ``docs/architecture.md`` tells how they move from clock to ledger.
"""

from __future__ import annotations

from alma_schedule.model.backfill import BACKFILL_ORIGIN, Backfill, BackfillStep
from alma_schedule.model.data import Data
from alma_schedule.model.ids import MANUAL_PREFIX, MAX_ID_LENGTH, check_id, check_new_id, manual_run_id, new_ulid
from alma_schedule.model.keys import RoutineKey, RunKey, Scope, check_scope, governed_key
from alma_schedule.model.money import Ceiling, ReserveResult
from alma_schedule.model.names import COLLECT_TASK, OUR_TASKS, RUN_MANY_TASK, RUN_TASK, TICK_TASK
from alma_schedule.model.protocols import Collects, Dispatcher, HasRevisionInputs, RoutineRunner, RunHandle, TellsLate
from alma_schedule.model.reasons import REASONS, Reason
from alma_schedule.model.results import ClaimResult, RunResult
from alma_schedule.model.routine import ROUTINE_STATES, Routine, RoutineSpec, RoutineVersion
from alma_schedule.model.run import (
    ACTIVE,
    ANNOTATABLE,
    BLOCKED_WHY,
    EDGES,
    NON_TERMINAL,
    TERMINAL,
    WAITING,
    BlockedWhy,
    RunRecord,
    RunState,
)
from alma_schedule.model.scan import ClaimScan, DueKey
from alma_schedule.model.tick import (
    ClaimBatch,
    Decision,
    Defer,
    Deferral,
    Erroring,
    Fire,
    NotDue,
    PlannedFire,
    PlannedRoutine,
    Resends,
    TickEndAsk,
    TickEndParts,
    TickError,
    TickMinute,
    TickPlan,
    TickProbe,
    TickReport,
    ZoneReconciliation,
)
from alma_schedule.model.time import SettableTime, aware_utc, system_time, trusted_now

__all__ = [
    "ACTIVE",
    "ANNOTATABLE",
    "BACKFILL_ORIGIN",
    "BLOCKED_WHY",
    "COLLECT_TASK",
    "EDGES",
    "MANUAL_PREFIX",
    "MAX_ID_LENGTH",
    "NON_TERMINAL",
    "OUR_TASKS",
    "REASONS",
    "ROUTINE_STATES",
    "RUN_MANY_TASK",
    "RUN_TASK",
    "TERMINAL",
    "TICK_TASK",
    "WAITING",
    "Backfill",
    "BackfillStep",
    "BlockedWhy",
    "Ceiling",
    "ClaimBatch",
    "ClaimResult",
    "ClaimScan",
    "Collects",
    "Data",
    "Decision",
    "Defer",
    "Deferral",
    "Dispatcher",
    "DueKey",
    "Erroring",
    "Fire",
    "HasRevisionInputs",
    "NotDue",
    "PlannedFire",
    "PlannedRoutine",
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
    "SettableTime",
    "TellsLate",
    "TickEndAsk",
    "TickEndParts",
    "TickError",
    "TickMinute",
    "TickPlan",
    "TickProbe",
    "TickReport",
    "ZoneReconciliation",
    "aware_utc",
    "check_id",
    "check_new_id",
    "check_scope",
    "governed_key",
    "manual_run_id",
    "new_ulid",
    "system_time",
    "trusted_now",
]
