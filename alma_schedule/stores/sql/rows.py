"""Rows to records and records to rows: the only place that knows both column names and dataclasses.
docs/architecture.md, section "The modules, in detail" (stores/sql/rows.py).
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any, TypeVar

from alma_schedule.compat.sqlalchemy import row_mapping
from alma_schedule.model import Deferral, Erroring, Routine, RoutineVersion, RunRecord, RunState
from alma_schedule.stores.sql.schema import routine_versions, routines, runs
from alma_schedule.stores.sql.types import UtcDateTime

_ROUTINE_COLS = tuple(c.name for c in routines.c)
_RUN_COLS = tuple(c.name for c in runs.c)
_VERSION_COLS = tuple(c.name for c in routine_versions.c if c.name != "version")
if _ROUTINE_COLS != tuple(f.name for f in fields(Routine)):  # pragma: no cover - a schema edit
    raise ImportError("routines columns must follow the fields of Routine, in order")
if _RUN_COLS != tuple(f.name for f in fields(RunRecord)):  # pragma: no cover - a schema edit
    raise ImportError("runs columns must follow the fields of RunRecord, in order")
_N_ROUTINE, _N_RUN = len(_ROUTINE_COLS), len(_RUN_COLS)
_RUN_LISTS = (_RUN_COLS.index("reserve_ceilings"), _RUN_COLS.index("caps_crossed"))
_RUN_AT = {name: i for i, name in enumerate(_RUN_COLS)}
_ROUTINE_INSTANTS = tuple(i for i, c in enumerate(routines.c) if isinstance(c.type, UtcDateTime))

R = TypeVar("R")


def _positional(cls: type[R], names: tuple[str, ...]) -> Callable[[Sequence[Any]], R]:
    """A constructor of the frozen, slotted dataclass ``cls`` from values in field order that sets
    each slot directly (one unrolled call per field): the generated ``__init__`` of a frozen
    dataclass goes through ``object.__setattr__`` per field, about three times slower. The classes
    have no ``__post_init__``; the values come from our own rows or statements."""
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    lines = ["def make(v):", "    o = new(cls)"]
    for i, name in enumerate(names):
        namespace[f"s{i}"] = cls.__dict__[name].__set__
        lines.append(f"    s{i}(o, v[{i}])")
    lines.append("    return o")
    exec("\n".join(lines), namespace)  # our own field names: nothing from input
    make: Callable[[Sequence[Any]], R] = namespace["make"]
    return make


_routine = _positional(Routine, _ROUTINE_COLS)
_record = _positional(RunRecord, _RUN_COLS)


def _json(value: Any) -> Any:
    # jsonb and SQLite's JSON type come back parsed; be tolerant of raw text all the same.
    return json.loads(value) if isinstance(value, (str, bytes)) else value


@functools.lru_cache(maxsize=4096)
def _schedule_items(text: str) -> tuple[tuple[str, Any], ...]:
    return tuple(json.loads(text).items())


def routine_from_row(row: Any) -> Routine:
    """A routine from a row that starts with every ``routines`` column, in order."""
    values = list(row[:_N_ROUTINE])
    values[4], values[5] = _json(values[4]), _json(values[5])  # schedule, definition
    return _routine(values)


def planning_routine(row: Any) -> Routine:
    """A routine from a row of :func:`~.queries.tick.select_due` ``planning=True``: its schedule as
    JSON text (parsed once per distinct text: many routines share a schedule; each routine gets its
    own dict) and no definition (``{}``: planning never reads it; a run reads its routine at start)."""
    values = list(row[:_N_ROUTINE])
    schedule = values[4]
    values[4] = dict(_schedule_items(schedule)) if isinstance(schedule, str) else _json(schedule)
    values[5] = {}
    return _routine(values)


def planning_routines(rows: Iterable[Sequence[Any]]) -> list[Routine]:
    """:func:`planning_routine` of rows as PostgreSQL's driver returns them (plain tuples, no
    SQLAlchemy result processing): the same routines. Its instants come aware in the session's
    zone (``TimeZone=UTC``: already UTC, kept as they are; any other zone is converted here)."""
    out = []
    for row in rows:
        values = list(row)
        values[4], values[5] = dict(_schedule_items(values[4])), {}
        for i in _ROUTINE_INSTANTS:
            at = values[i]
            if at is not None and at.tzinfo is not UTC:
                values[i] = at.astimezone(UTC)
        out.append(_routine(values))
    return out


def routine_after_run(row: Any) -> Routine:
    """The routine of a row that starts with every ``runs`` column, then every ``routines`` column."""
    return routine_from_row(tuple(row)[_N_RUN:])


def version_from_row(row: Any) -> RoutineVersion:
    m = row_mapping(row)
    values = {name: m[name] for name in _VERSION_COLS}
    values["schedule"] = _json(values["schedule"])
    values["definition"] = _json(values["definition"])
    return RoutineVersion(**values)


def _run(values: list[Any]) -> RunRecord:
    for i in _RUN_LISTS:
        values[i] = tuple(_json(values[i]) or ())
    return _record(values)


def run_from_row(row: Any) -> RunRecord:
    """A run from a row that starts with every ``runs`` column, in order (extra columns ignored)."""
    return _run(list(row[:_N_RUN]))


def run_from_values(values: Mapping[str, Any]) -> RunRecord:
    """The record of a row we inserted, from the values we inserted (no re-read needed)."""
    return _run([values[name] for name in _RUN_COLS])


def routine_values(routine: Routine) -> dict[str, Any]:
    """Every column of a routine row (JSON bodies as given: already validated plain values)."""
    return {name: getattr(routine, name) for name in _ROUTINE_COLS}


def record_values(rec: RunRecord) -> dict[str, Any]:
    """Every column of a run row, from its record (the JSON lists as lists)."""
    values = {name: getattr(rec, name) for name in _RUN_COLS}
    for i in _RUN_LISTS:
        values[_RUN_COLS[i]] = list(values[_RUN_COLS[i]])
    return values


_run_values = operator.attrgetter(*_RUN_COLS)  # a record's values in column order, in one call


def record_with(rec: RunRecord, **changes: Any) -> RunRecord:
    """``dataclasses.replace`` for a run record, positionally (no ``__init__``)."""
    values = list(_run_values(rec))
    for name, value in changes.items():
        values[_RUN_AT[name]] = value
    return _record(values)


#: A fresh run row's values, in column order, before the fire's own (see :func:`new_record`).
_FRESH: dict[str, Any] = dict.fromkeys(_RUN_COLS) | {
    "send_attempts": 0,
    "poll_attempts": 0,
    "reserved_micros": 0,
    "reserve_ceilings": (),
    "cost_micros": 0,
    "caps_crossed": (),
}
_FRESH_VALUES = tuple(_FRESH.values())
_I = {name: _RUN_AT[name] for name in ("org", "uid", "routine_id", "run_id", "state", "origin", "config_revision",
                                         "fire_at", "claimed_at", "state_at", "expires_at", "reason", "finished_at",
                                         "resend_at", "due_at")}  # fmt: skip


def new_record(
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
) -> RunRecord:
    """The record of a freshly inserted run row (a claim, or a terminal skip): claimed and state
    instants ``now``, counters zero, no money; ``finished_at`` ``now`` unless ``claimed``;
    ``due_at`` defaults to ``fire_at`` (a fire without jitter, a manual run)."""
    v = list(_FRESH_VALUES)
    i = _I
    v[i["org"]], v[i["uid"]], v[i["routine_id"]] = key
    v[i["run_id"]], v[i["state"]], v[i["origin"]], v[i["config_revision"]] = run_id, state, origin, config_revision
    v[i["fire_at"]], v[i["claimed_at"]], v[i["state_at"]], v[i["expires_at"]] = fire_at, now, now, expires_at
    v[i["reason"]], v[i["resend_at"]] = reason, resend_at
    v[i["finished_at"]] = None if state == RunState.CLAIMED else now
    v[i["due_at"]] = fire_at if due_at is None else due_at
    return _record(v)


def new_run(key: tuple[str, str, str], run_id: str, **fields: Any) -> dict[str, Any]:
    """The column values of a freshly inserted run row: :func:`new_record` (same keywords) as a mapping."""
    return record_values(new_record(key, run_id, **fields))


def erroring_from_rows(rows: Sequence[Sequence[Any]], limit: int) -> Erroring:
    """The rows of :func:`.queries.wake.erroring` (read by position: SQLAlchemy's or the driver's
    tuples, whose instants are made UTC here) as :class:`Erroring`: at most ``limit`` of them, and
    the count every row carries."""
    if not rows:
        return Erroring()
    found = (Deferral(r[0], r[1], r[2], as_utc(r[3]), r[4], first=False) for r in rows)
    return Erroring(tuple(found)[:limit], int(rows[0][5]))


def as_utc(at: Any) -> Any:
    """An instant the driver returned (in the session's zone) in UTC; None stays None."""
    return at if at is None or at.tzinfo is UTC else at.astimezone(UTC)
