"""Rows to records and records to rows: the only place that knows both column names and dataclasses."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from alma_schedule.contracts import Routine, RoutineVersion, RunRecord
from alma_schedule.stores.sql.schema import routine_versions, routines, runs

_ROUTINE_COLS = tuple(c.name for c in routines.c)
_RUN_COLS = tuple(c.name for c in runs.c)
_VERSION_COLS = tuple(c.name for c in routine_versions.c if c.name != "version")


def _json(value: Any) -> Any:
    # jsonb comes back parsed; SQLite's JSON type parses too, but be tolerant of raw text.
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def routine_from_row(row: Any) -> Routine:
    m: Mapping[str, Any] = row._mapping
    values = {name: m[name] for name in _ROUTINE_COLS}
    values["schedule"] = _json(values["schedule"])
    values["definition"] = _json(values["definition"])
    return Routine(**values)


def version_from_row(row: Any) -> RoutineVersion:
    m: Mapping[str, Any] = row._mapping
    values = {name: m[name] for name in _VERSION_COLS}
    values["schedule"] = _json(values["schedule"])
    values["definition"] = _json(values["definition"])
    return RoutineVersion(**values)


def run_from_row(row: Any) -> RunRecord:
    m: Mapping[str, Any] = row._mapping
    values = {name: m[name] for name in _RUN_COLS}
    values["reserve_ceilings"] = tuple(_json(values["reserve_ceilings"]) or ())
    values["caps_crossed"] = tuple(_json(values["caps_crossed"]) or ())
    return RunRecord(**values)


def run_from_values(values: Mapping[str, Any]) -> RunRecord:
    """The record of a row we inserted, from the values we inserted (no re-read needed)."""
    out = {name: values[name] for name in _RUN_COLS}
    out["reserve_ceilings"] = tuple(out["reserve_ceilings"])
    out["caps_crossed"] = tuple(out["caps_crossed"])
    return RunRecord(**out)


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
) -> dict[str, Any]:
    """The column values of a freshly inserted run row (a claim, or a terminal skip)."""
    return {
        "org": key[0],
        "uid": key[1],
        "routine_id": key[2],
        "run_id": run_id,
        "state": state,
        "reason": reason,
        "origin": origin,
        "config_revision": config_revision,
        "fire_at": fire_at,
        "claimed_at": now,
        "state_at": now,
        "expires_at": expires_at,
        "started_at": None,
        "submitted_at": None,
        "finished_at": None if state == "claimed" else now,
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
    }
