"""``alma-schedule routines ...``: register, inspect and steer a scope's routines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.wiring import build_schedule, parse_instant
from alma_schedule.errors import InvalidInput, NotFound
from alma_schedule.model import Routine, RoutineSpec, Scope


def _json_arg(name: str, text: str) -> Any:
    """Parse JSON given inline or as ``@file.json``."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"{name}: cannot read {text[1:]!r}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{name} is not JSON: {exc.msg} (line {exc.lineno} column {exc.colno})") from None


def _routine_row(r: Routine) -> list[Any]:
    state = r.inactive_reason or "active"
    if r.paused_reason:
        state = f"paused ({r.paused_reason})"
    return [
        r.routine_id,
        r.kind,
        json.dumps(dict(r.schedule)),
        state,
        r.next_due_at.isoformat() if r.next_due_at else "-",
        r.last_fire.isoformat() if r.last_fire else "-",
        r.consecutive_failures,
        r.last_error or "",
    ]


ROUTINE_COLUMNS = ["id", "kind", "schedule", "state", "next due (UTC)", "last fire", "failures", "last error"]


@click.group("routines")
def routines() -> None:
    """Register and steer routines (every command takes the scope ORG/UID)."""


@routines.command("add")
@click.argument("scope")
@click.argument("routine_id")
@click.option("--kind", required=True, help="Runner kind: task, turn, job, ...")
@click.option("--schedule", "schedule_text", required=True, help='JSON, e.g. \'{"cron": "0 8 * * 1-5"}\'.')
@click.option("--definition", "definition_text", default="{}", help="JSON or @file.json.")
@click.option("--at", "at", default=None, help="Registration instant (embedded store only; default now).")
@json_option
@click.pass_obj
@handle_errors
def add(
    obj: CliContext,
    scope: str,
    routine_id: str,
    kind: str,
    schedule_text: str,
    definition_text: str,
    at: str | None,
    as_json: bool,
) -> None:
    """Register (or re-register) a routine; prints its next 3 fires as the receipt.

    \b
    Example:
      alma-schedule routines add acme/alice briefing --kind turn \\
        --schedule '{"cron": "0 8 * * 1-5", "tz": "Europe/Lisbon"}' --definition @briefing.json
    """
    sc = Scope.parse(scope)
    spec = RoutineSpec(
        sc.org,
        sc.uid,
        routine_id,
        kind,
        _json_arg("--schedule", schedule_text),
        _json_arg("--definition", definition_text),
    )
    schedule = build_schedule(obj)
    receipt = schedule.register(spec, now=parse_instant(at) if at else None)
    if as_json:
        emit_json(receipt.to_dict())
        return
    verb = "registered" if receipt.changed else "unchanged"
    click.echo(f"{verb} {sc}/{routine_id} (revision {receipt.routine.config_revision[:12]})")
    for w in receipt.warnings:
        click.echo(f"warning: {w}")
    print_table("next fires", ["#", "UTC"], [(i + 1, f.isoformat()) for i, f in enumerate(receipt.next_fires)])


@routines.command("list")
@click.argument("scope")
@click.option("--deleted", is_flag=True, help="Include tombstoned routines.")
@json_option
@click.pass_obj
@handle_errors
def list_(obj: CliContext, scope: str, deleted: bool, as_json: bool) -> None:
    """List a scope's routines.

    \b
    Example:
      alma-schedule routines list acme/alice --json
    """
    sc = Scope.parse(scope)
    rows = obj.store().list_routines(sc, include_deleted=deleted)
    if as_json:
        emit_json([r.to_dict() for r in rows])
        return
    print_table(f"routines of {sc}", ROUTINE_COLUMNS, [_routine_row(r) for r in rows])


def _get(obj: CliContext, sc: Scope, routine_id: str) -> Routine:
    r: Routine | None = obj.store().get_routine(sc, routine_id, include_deleted=True)
    if r is None:
        raise NotFound(f"no routine {routine_id!r} in {sc}")
    return r


@routines.command("show")
@click.argument("scope")
@click.argument("routine_id")
@json_option
@click.pass_obj
@handle_errors
def show(obj: CliContext, scope: str, routine_id: str, as_json: bool) -> None:
    """Show one routine with its definition.

    \b
    Example:
      alma-schedule routines show acme/alice briefing
    """
    r = _get(obj, Scope.parse(scope), routine_id)
    if as_json:
        emit_json(r.to_dict())
        return
    print_table(f"routine {r.key}", ["field", "value"], [(k, v) for k, v in r.to_dict().items()])


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
    """Preview a routine's next fires in UTC and its zone, DST transitions marked.

    \b
    Example:
      alma-schedule routines next acme/alice briefing -n 10
    """
    from alma_schedule.core import parse_schedule, preview_fires

    r = _get(obj, Scope.parse(scope), routine_id)
    start = max(obj.settings.now().replace(microsecond=0), r.last_fire or r.registered_at)
    rows = preview_fires(parse_schedule(dict(r.schedule)), r.registered_at, start, count)
    if as_json:
        emit_json([{"utc": p.utc, "local": p.local, "zone": p.zone, "note": p.dst_note} for p in rows])
        return
    print_table(
        f"next fires of {r.key}",
        ["#", "UTC", "local", "zone", "note"],
        [(i + 1, p.utc.isoformat(), p.local.isoformat(), p.zone, p.dst_note or "") for i, p in enumerate(rows)],
    )


def register(group: click.Group) -> None:
    group.add_command(routines)
