"""``alma-schedule routines add | update``: create a routine, or change one, never by accident.

docs/architecture.md, section "The modules, in detail" (cli/routines_add.py).
"""

from __future__ import annotations

import json
from typing import Any

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.history import actor_option, cli_actor
from alma_schedule.cli.wiring import build_schedule, is_embedded, parse_instant
from alma_schedule.engine.register import RegisterMode, RegistrationReceipt
from alma_schedule.errors import InvalidInput, NotFound, RegistrationRefused
from alma_schedule.model import RoutineSpec, Scope, provenance

UPDATE_HINT = "change it with `routines update` (or `routines add --update`)"


def json_arg(name: str, text: str, limit: int | None = None, setting: str = "") -> Any:
    """Parse JSON given inline or as ``@file.json``; a file is read up to ``limit`` bytes (the
    setting named by ``setting``) and refused past it, so ``@/dev/zero`` is one line, not a kill."""
    if text.startswith("@"):
        text = _read_bounded(name, text[1:], limit, setting)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{name} is not JSON: {exc.msg} (line {exc.lineno} column {exc.colno})") from None
    except RecursionError:  # the decoder recurses per level: a text of 100,000 '[' ends here
        raise InvalidInput(f"{name} is nested too deeply to parse") from None


def _read_bounded(name: str, path: str, limit: int | None, setting: str) -> str:
    """The text of ``path``, at most ``limit`` bytes of it read (one more tells it is larger)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read() if limit is None else fh.read(limit + 1)
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot read {path!r}: {exc.strerror}") from None
    if limit is not None and len(data) > limit:
        raise InvalidInput(f"{name}: {path!r} is larger than {setting} ({limit} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{name}: {path!r} is not UTF-8 text") from None


def _definition(obj: CliContext, text: str) -> Any:
    return json_arg("--definition", text, obj.settings.max_definition_bytes, "ALMA_MAX_DEFINITION_BYTES")


def _schedule(obj: CliContext, text: str) -> Any:
    return json_arg("--schedule", text, obj.settings.max_schedule_bytes, "ALMA_MAX_SCHEDULE_BYTES")


def refuse_at_in_production(obj: CliContext, at: str | None) -> None:
    """``--at`` back-dates a routine's registration (its ``every`` anchor): embedded store only."""
    if at is not None and not is_embedded(obj.settings):
        raise InvalidInput(
            "--at is only for the embedded store (SQLite or memory): a production store registers at its own now"
        )


def _register(
    obj: CliContext, spec: RoutineSpec, at: str | None, mode: RegisterMode, actor: str | None = None
) -> RegistrationReceipt:
    refuse_at_in_production(obj, at)
    who = cli_actor(actor)
    sc = spec.scope
    current = obj.store().get_routine(sc, spec.routine_id)
    if mode == "create" and current is not None:
        raise RegistrationRefused(f"routine {spec.key} already exists: {UPDATE_HINT}")
    if current is not None and (current.source or "").startswith(provenance.BEAT_SYNC):
        click.echo(
            f"warning: {spec.key} is synced from beat_schedule ({current.source}, entry {current.source_entry}): "
            "the next beat sync overwrites its schedule and definition; change the entry in code to keep a change",
            err=True,
        )
    schedule = build_schedule(obj)
    try:
        return schedule.register(spec, now=parse_instant(at) if at else None, mode=mode, actor=who)
    except RegistrationRefused as exc:  # created by a racing writer between the check and the write
        if mode == "create" and str(exc).endswith("already exists"):
            raise RegistrationRefused(f"{exc}: {UPDATE_HINT}") from None
        raise


def _print_receipt(receipt: RegistrationReceipt, as_json: bool, *, created: bool) -> None:
    if as_json:
        emit_json(receipt.to_dict())
        return
    r = receipt.routine
    verb = ("registered" if created else "updated") if receipt.changed else "unchanged"
    click.echo(f"{verb} {r.key} (revision {r.config_revision[:12]})")
    for w in receipt.warnings:
        click.echo(f"warning: {w}")
    print_table("next fires", ["#", "UTC"], [(i + 1, f.isoformat()) for i, f in enumerate(receipt.next_fires)])


_AT_HELP = "Registration instant (embedded store only; default now)."


@click.command("add")
@click.argument("scope")
@click.argument("routine_id")
@click.option("--kind", required=True, help="Runner kind: task, turn, job, ...")
@click.option("--schedule", "schedule_text", required=True, help='JSON, e.g. \'{"cron": "0 8 * * 1-5"}\'.')
@click.option("--definition", "definition_text", default="{}", help="JSON or @file.json.")
@click.option("--at", "at", default=None, help=_AT_HELP)
@click.option("--update", "upsert", is_flag=True, help="Update the routine if the id exists (default: refuse).")
@actor_option
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
    upsert: bool,
    actor: str | None,
    as_json: bool,
) -> None:
    """Register a new routine; prints its next 3 fires as the receipt.

    An id that already has a routine is refused unless --update (then it is updated: the cursor
    and the `every` anchor are kept unless the schedule / interval changes).

    \b
    Example:
      alma-schedule routines add acme/alice briefing --kind turn \\
        --schedule '{"cron": "0 8 * * 1-5", "tz": "Europe/Lisbon"}' --definition @briefing.json
    """
    refuse_at_in_production(obj, at)
    sc = Scope.parse(scope)
    spec = RoutineSpec(
        sc.org,
        sc.uid,
        routine_id,
        kind,
        _schedule(obj, schedule_text),
        _definition(obj, definition_text),
        source=provenance.CLI,
    )
    existed = upsert and obj.store().get_routine(sc, routine_id) is not None
    receipt = _register(obj, spec, at, "upsert" if upsert else "create", actor)
    _print_receipt(receipt, as_json, created=not existed)


@click.command("update")
@click.argument("scope")
@click.argument("routine_id")
@click.option("--kind", default=None, help="New runner kind (default: keep).")
@click.option("--schedule", "schedule_text", default=None, help="New schedule JSON (default: keep).")
@click.option("--definition", "definition_text", default=None, help="New definition, JSON or @file (default: keep).")
@click.option("--at", "at", default=None, help=_AT_HELP)
@actor_option
@json_option
@click.pass_obj
@handle_errors
def update(
    obj: CliContext,
    scope: str,
    routine_id: str,
    kind: str | None,
    schedule_text: str | None,
    definition_text: str | None,
    at: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Change an existing routine (unknown id: not found); options not given keep their value.

    The cursor and the `every` anchor are kept unless the schedule changes; the anchor moves only
    when the `every` interval changes. A routine's enabled / paused state is never touched.

    \b
    Example:
      alma-schedule routines update acme/alice briefing --schedule '{"cron": "0 9 * * 1-5"}'
    """
    refuse_at_in_production(obj, at)
    sc = Scope.parse(scope)
    current = obj.store().get_routine(sc, routine_id)
    if current is None:
        raise NotFound.of("routine", f"{sc}/{routine_id}")
    spec = RoutineSpec(
        sc.org,
        sc.uid,
        routine_id,
        kind if kind is not None else current.kind,
        _schedule(obj, schedule_text) if schedule_text is not None else dict(current.schedule),
        _definition(obj, definition_text) if definition_text is not None else dict(current.definition),
        source=provenance.CLI,
    )
    _print_receipt(_register(obj, spec, at, "update", actor), as_json, created=False)
