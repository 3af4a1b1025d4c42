"""``alma-schedule routines ...``: register, inspect and steer a scope's routines."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.routines_add import add, update
from alma_schedule.cli.wiring import build_schedule
from alma_schedule.errors import NotFound
from alma_schedule.model import Routine, RunRecord, Scope


def last_scheduled_run(store: Any, sc: Scope, routine_id: str) -> RunRecord | None:
    """The newest run the schedule claimed (``origin == "schedule"``: manual triggers skipped), from
    the ledger; pages back until one is found or the routine's ledger ends."""
    before: tuple[datetime, str] | None = None
    while True:
        page: list[RunRecord] = store.list_runs(sc, routine_id=routine_id, limit=PAGE, before=before)
        for run in page:
            if run.origin == "schedule":
                return run
        if len(page) < PAGE:
            return None
        before = (page[-1].fire_at, page[-1].run_id)


def _last_run_text(run: RunRecord | None) -> str:
    return f"{run.fire_at.isoformat()} {run.state}" if run is not None else "-"


def _routine_row(r: Routine, last: RunRecord | None) -> list[Any]:
    state = r.inactive_reason or "active"
    if r.paused_reason:
        state = f"paused ({r.paused_reason})"
    return [
        r.routine_id,
        r.kind,
        json.dumps(dict(r.schedule)),
        state,
        r.next_due_at.isoformat() if r.next_due_at else "-",
        _last_run_text(last),
        r.last_fire.isoformat() if r.last_fire else "-",
        r.consecutive_failures,
        r.last_error or "",
    ]


#: "last run" is the newest fire the schedule claimed (the ledger); "cursor" is where the schedule
#: resumes counting from (the last claimed fire, or the instant of a resume / enable / schedule change).
ROUTINE_COLUMNS = [
    "id", "kind", "schedule", "state", "next due (UTC)", "last run (fire, state)", "cursor", "failures", "last error",
]
PAGE = 50


def plain_value(value: Any) -> str:
    """One value of ``routines show`` as text: JSON for objects, lists and booleans, ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (dict, list, tuple, bool)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


@click.group("routines")
def routines() -> None:
    """Register and steer routines (every command takes the scope ORG/UID)."""


routines.add_command(add)
routines.add_command(update)


@routines.command("list")
@click.argument("scope")
@click.option("--deleted", is_flag=True, help="Include tombstoned routines.")
@json_option
@click.pass_obj
@handle_errors
def list_(obj: CliContext, scope: str, deleted: bool, as_json: bool) -> None:
    """List a scope's routines.

    "last run" is the newest fire the schedule claimed (from the run ledger, with its state);
    "cursor" is where the schedule resumes counting from: the last claimed fire, or the instant of
    a resume, an enable or a schedule change.

    \b
    Example:
      alma-schedule routines list acme/alice --json
    """
    sc = Scope.parse(scope)
    rows = obj.store().list_routines(sc, include_deleted=deleted)
    if as_json:
        emit_json([r.to_dict() for r in rows])
        return
    store = obj.store()
    table = [_routine_row(r, last_scheduled_run(store, sc, r.routine_id)) for r in rows]
    print_table(f"routines of {sc}", ROUTINE_COLUMNS, table)


def _get(obj: CliContext, sc: Scope, routine_id: str) -> Routine:
    r: Routine | None = obj.store().get_routine(sc, routine_id, include_deleted=True)
    if r is None:
        raise NotFound.of("routine", f"{sc}/{routine_id}")
    return r


@routines.command("show")
@click.argument("scope")
@click.argument("routine_id")
@json_option
@click.pass_obj
@handle_errors
def show(obj: CliContext, scope: str, routine_id: str, as_json: bool) -> None:
    """Show one routine with its definition (values as JSON / ISO instants) and its last run.

    \b
    Example:
      alma-schedule routines show acme/alice briefing
    """
    r = _get(obj, Scope.parse(scope), routine_id)
    if as_json:
        emit_json(r.to_dict())
        return
    rows = [(k, plain_value(v)) for k, v in r.to_dict().items()]
    rows.append(("last run (fire, state)", _last_run_text(last_scheduled_run(obj.store(), r.scope, r.routine_id))))
    print_table(f"routine {r.key}", ["field", "value"], rows)


_PAST = {"disable": "disabled", "enable": "enabled", "pause": "paused", "resume": "resumed", "delete": "deleted"}


def _lever(name: str, doc: str) -> None:
    @routines.command(name, help=doc)
    @click.argument("scope")
    @click.argument("routine_id")
    @click.option("--reason", default="manual", help="Pause reason (pause only).", hidden=name != "pause")
    @json_option
    @click.pass_obj
    @handle_errors
    def lever(obj: CliContext, scope: str, routine_id: str, reason: str, as_json: bool) -> None:
        sc = Scope.parse(scope)
        schedule = build_schedule(obj, sends=name == "trigger")
        result: Any
        if name == "pause":
            result = schedule.pause(sc, routine_id, reason)
        else:
            result = getattr(schedule, name)(sc, routine_id)
        if as_json:
            emit_json(result.to_dict())
        elif name == "trigger":
            click.echo(f"triggered {result.key} ({result.state})")
        else:
            click.echo(f"{_PAST[name]} {sc}/{routine_id}")


for _name, _doc in (
    ("disable", "Disable a routine (the owner's lever). Example: alma-schedule routines disable acme/alice r1"),
    ("enable", "Enable a routine; its cursor restarts now. Example: alma-schedule routines enable acme/alice r1"),
    ("pause", "Pause a routine. Example: alma-schedule routines pause acme/alice r1 --reason maintenance"),
    ("resume", "Resume; streak reset, cursor restarts now. Example: alma-schedule routines resume acme/alice r1"),
    ("delete", "Delete (tombstone) a routine. Example: alma-schedule routines delete acme/alice r1"),
    ("trigger", "Run now, once (manual run). Example: alma-schedule routines trigger acme/alice r1"),
):
    _lever(_name, _doc)


@routines.command("next")
@click.argument("scope")
@click.argument("routine_id")
@click.option("-n", "count", default=10, show_default=True, type=click.IntRange(1, 1000))
@json_option
@click.pass_obj
@handle_errors
def next_(obj: CliContext, scope: str, routine_id: str, count: int, as_json: bool) -> None:
    """Preview a routine's next fires in UTC and its zone (jitter applied), DST transitions marked.

    \b
    Example:
      alma-schedule routines next acme/alice briefing -n 10
    """
    from alma_schedule.engine.upcoming import upcoming_fires

    r = _get(obj, Scope.parse(scope), routine_id)
    rows = upcoming_fires(r, obj.settings.now().replace(microsecond=0), count)
    if as_json:
        emit_json([{"utc": p.utc, "local": p.local, "zone": p.zone, "note": p.note, "fire": p.fire} for p in rows])
        return
    print_table(
        f"next fires of {r.key}",
        ["#", "UTC", "local", "zone", "note"],
        [(i + 1, p.utc.isoformat(), p.local.isoformat(), p.zone, p.note or "") for i, p in enumerate(rows)],
    )


def register(group: click.Group) -> None:
    group.add_command(routines)
