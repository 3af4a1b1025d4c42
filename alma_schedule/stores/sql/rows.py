"""Rows to records and records to rows: the only place that knows both column names and dataclasses.

The ``routines`` and ``runs`` columns are declared in the field order of :class:`Routine` and
:class:`RunRecord` (checked below, at import), so a row becomes a record positionally: the tick
turns thousands of rows into records per batch, and keyword construction would dominate its cost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any

from alma_schedule.model import Routine, RoutineVersion, RunRecord, RunState
from alma_schedule.stores.sql.schema import routine_versions, routines, runs

_ROUTINE_COLS = tuple(c.name for c in routines.c)
_RUN_COLS = tuple(c.name for c in runs.c)
_VERSION_COLS = tuple(c.name for c in routine_versions.c if c.name != "version")
if _ROUTINE_COLS != tuple(f.name for f in fields(Routine)):  # pragma: no cover - a schema edit
    raise ImportError("routines columns must follow the fields of Routine, in order")
if _RUN_COLS != tuple(f.name for f in fields(RunRecord)):  # pragma: no cover - a schema edit
    raise ImportError("runs columns must follow the fields of RunRecord, in order")
_N_ROUTINE, _N_RUN = len(_ROUTINE_COLS), len(_RUN_COLS)
_RUN_LISTS = (_RUN_COLS.index("reserve_ceilings"), _RUN_COLS.index("caps_crossed"))


def _json(value: Any) -> Any:
    # jsonb and SQLite's JSON type come back parsed; be tolerant of raw text all the same.
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def routine_from_row(row: Any) -> Routine:
    """A routine from a row that starts with every ``routines`` column, in order."""
    values = list(row[:_N_ROUTINE])
    values[4], values[5] = _json(values[4]), _json(values[5])  # schedule, definition
    return Routine(*values)


def routine_after_run(row: Any) -> Routine:
    """The routine of a row that starts with every ``runs`` column, then every ``routines`` column."""
    return routine_from_row(tuple(row)[_N_RUN:])


def version_from_row(row: Any) -> RoutineVersion:
    m: Mapping[str, Any] = row._mapping
    values = {name: m[name] for name in _VERSION_COLS}
    values["schedule"] = _json(values["schedule"])
    values["definition"] = _json(values["definition"])
    return RoutineVersion(**values)


def _run(values: list[Any]) -> RunRecord:
    for i in _RUN_LISTS:
        values[i] = tuple(_json(values[i]) or ())
    return RunRecord(*values)


def run_from_row(row: Any) -> RunRecord:
    """A run from a row that starts with every ``runs`` column, in order (extra columns ignored)."""
    return _run(list(row[:_N_RUN]))


def run_from_values(values: Mapping[str, Any]) -> RunRecord:
    """The record of a row we inserted, from the values we inserted (no re-read needed)."""
    return _run([values[name] for name in _RUN_COLS])


def routine_values(routine: Routine) -> dict[str, Any]:
    """Every column of a routine row (JSON bodies as given: already validated plain values)."""
    return {name: getattr(routine, name) for name in _ROUTINE_COLS}


def new_run(
    key: tuple[str, str, str],
    run_id: str,
    *,
    state: str,
    origin: str,
    config_revision: str,
    fire_at: datetime,
    now: datetime,
    expires_at: datetime,
    reason: str | None = None,
    resend_at: datetime | None = None,
    due_at: datetime | None = None,
) -> dict[str, Any]:
    """The column values of a freshly inserted run row (a claim, or a terminal skip); ``due_at``
    defaults to ``fire_at`` (a fire without jitter, a manual run)."""
    return {
        "org": key[0],
        "uid": key[1],
        "routine_id": key[2],
        "run_id": run_id,
        "state": state,
        "origin": origin,
        "config_revision": config_revision,
        "fire_at": fire_at,
        "claimed_at": now,
        "state_at": now,
        "expires_at": expires_at,
        "reason": reason,
        "started_at": None,
        "submitted_at": None,
        "finished_at": None if state == RunState.CLAIMED else now,
        "resend_at": resend_at,
        "send_attempts": 0,
        "next_poll_at": None,
        "poll_attempts": 0,
        "deadline": None,
        "target_task_id": None,
        "error_class": None,
        "reserved_micros": 0,
        "reserve_day": None,
        "reserve_ceilings": [],
        "cost_micros": 0,
        "caps_crossed": [],
        "session_id": None,
        "turn_id": None,
        "batch_id": None,
        "delivery_hash": None,
        "result_text": None,
        "erase_at": None,
        "blocked_at": None,
        "blocked_why": None,
        "owner": None,
        "due_at": fire_at if due_at is None else due_at,
    }
