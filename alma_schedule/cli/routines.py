"""``alma-schedule routines ...``: register, inspect and steer a scope's routines."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.history import actor_option, cli_actor, history
from alma_schedule.cli.routines_add import add, update
from alma_schedule.cli.routines_ops import backfill, describe
from alma_schedule.cli.terminal import terminal_text
from alma_schedule.cli.wiring import build_schedule
from alma_schedule.core.policy import policy_of
from alma_schedule.errors import AlmaScheduleError, InvalidInput, NotFound
from alma_schedule.model import ROUTINE_STATES, Routine, RunRecord, RunState, Scope, provenance
from alma_schedule.policies import finished, missed


def last_scheduled_run(store: Any, sc: Scope, routine_id: str) -> RunRecord | None:
    """The newest run the schedule claimed (``origin == "schedule"``: manual triggers skipped), from
    the ledger; pages back until one is found or the routine's ledger ends."""
    before: tuple[datetime, str, str] | None = None
    while True:
        page: list[RunRecord] = store.list_runs(sc, routine_id=routine_id, limit=PAGE, before=before)
        for run in page:
            if run.origin == "schedule":
                return run
        if len(page) < PAGE:
            return None
        before = (page[-1].fire_at, page[-1].run_id, page[-1].routine_id)


def _last_run_text(run: RunRecord | None) -> str:
    return f"{run.fire_at.isoformat()} {run.state}" if run is not None else "-"


def state_text(r: Routine, now: datetime) -> str:
    """The state column: ``active``, ``paused (<reason>)``, ``disabled``, ``deleted`` or
    ``finished (<not_after | max_runs | exhausted>)`` (:mod:`alma_schedule.policies.finished`)."""
    state = finished.routine_state(r, now)
    if state == finished.FINISHED:
        return f"finished ({finished.finished_reason(r, now)})"
    if state == "paused":
        return f"paused ({r.paused_reason})"
    if state == "disabled" and r.disabled_reason:
        return f"disabled ({r.disabled_reason})"
    return state


def routine_json(r: Routine, now: datetime) -> dict[str, Any]:
    """A routine as ``--json`` shows it: its row, its ``state`` and its ``finished`` reason (or null)."""
    return {**r.to_dict(), "state": finished.routine_state(r, now), "finished": finished.finished_reason(r, now)}


def _over_text(names: tuple[str, ...]) -> str:
    return ", ".join(names) if names else "-"


def _routine_row(r: Routine, last: RunRecord | None, now: datetime, over: tuple[str, ...] = ()) -> list[Any]:
    state = state_text(r, now)
    return [
        r.routine_id,
        r.kind,
        json.dumps(dict(r.schedule)),
        state,
        r.next_due_at.isoformat() if r.next_due_at else "-",
        _last_run_text(last),
        r.last_fire.isoformat() if r.last_fire else "-",
        missed.shown(r.fires_missed, r.fires_missed_capped),
        r.consecutive_failures,
        r.last_error or "",
        _over_text(over),
    ]


#: "last run" is the newest fire the schedule claimed (the ledger); "cursor" is where the schedule
#: resumes counting from (the last claimed fire, or the instant of a resume / enable / schedule change);
#: "missed fires" the fires claims collapsed, with no run row (``policies.missed``: "10,000+" once a
#: claim reached its cap).
ROUTINE_COLUMNS = [
    "id",
    "kind",
    "schedule",
    "state",
    "next due (UTC)",
    "last run (fire, state)",
    "cursor",
    "missed fires",
    "failures",
    "last error",
    "over limits",
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
routines.add_command(backfill)
routines.add_command(describe)
routines.add_command(history)


@routines.command("list")
@click.argument("scope", required=False)
@click.option("--deleted", is_flag=True, help="Include tombstoned routines (one scope only).")
@click.option("--all", "every_scope", is_flag=True, help="Every scope (a system operation: operators only).")
@click.option("--kind", default=None, help="Only routines of this kind.")
@click.option("--state", type=click.Choice(ROUTINE_STATES), default=None, help="Only routines in this state.")
@click.option(
    "--limit", default=1000, show_default=True, type=click.IntRange(1), help="With --all: at most this many rows."
)
@json_option
@click.pass_obj
@handle_errors
def list_(
    obj: CliContext,
    scope: str | None,
    deleted: bool,
    every_scope: bool,
    kind: str | None,
    state: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List a scope's routines, or with --all every scope's (with a count per scope).

    "last run" is the newest fire the schedule claimed (from the run ledger, with its state);
    "source" (shown when a routine of the scope was synced from beat or imported) is where it came
    from; `routines show` and `describe` give every routine's. "cursor" is where the schedule
    resumes counting from: the last claimed fire, or the instant of a resume, an enable or a
    schedule change. "missed fires" counts the fires of the schedule that
    no tick claimed (collapsed by downtime, an expired tick or a clock slower than the routine: they
    have no run row), never those of a pause, a disable or a schedule change; "10,000+" once a claim
    counted its 10,000 limit. "over limits" names the registration limits a stored
    row exceeds (`max_definition_bytes`, `max_schedule_bytes`, `max_nesting_depth`, `max_cap_usd`):
    it keeps running; a re-registration would be refused (`--json`: `over_limits`). --all is a
    system operation (it crosses every scope); it reads with two queries, never one per routine.

    \b
    Example:
      alma-schedule routines list acme/alice --json
      alma-schedule routines list --all --state erroring
    """
    from alma_schedule.engine.limits import over_limits

    if every_scope:
        if scope is not None or deleted:
            raise InvalidInput("--all takes no SCOPE and no --deleted")
        _list_all(obj, kind, state, limit, as_json)
        return
    if scope is None:
        raise InvalidInput("routines list needs a SCOPE (ORG/UID), or --all")
    sc = Scope.parse(scope)
    rows = [
        r
        for r in obj.store().list_routines(sc, include_deleted=deleted)
        if (kind is None or r.kind == kind) and (state is None or (r.deleted_at is None and state in r.state_names))
    ]
    now = obj.settings.now()
    settings = obj.settings
    if as_json:
        emit_json([{**routine_json(r, now), "over_limits": list(over_limits(r, settings))} for r in rows])
        return
    store = obj.store()
    table = [_routine_row(r, last_scheduled_run(store, sc, r.routine_id), now, over_limits(r, settings)) for r in rows]
    columns = ROUTINE_COLUMNS
    if any(r.source_entry for r in rows):  # synced or imported routines: say which (show/describe: the entry)
        table = [[*row, r.source or "-"] for row, r in zip(table, rows, strict=True)]
        columns = [*ROUTINE_COLUMNS, "source"]
    print_table(f"routines of {sc}", columns, table)


def _list_all(obj: CliContext, kind: str | None, state: str | None, limit: int, as_json: bool) -> None:
    """``routines list --all``: the store's system listing and its grouped count (two queries)."""
    store = obj.store()
    rows = store.system_routines(kind=kind, state=state, limit=limit)
    counts = store.system_routine_counts(kind=kind, state=state)
    total = sum(n for _, _, n in counts)
    if as_json:
        emit_json(
            {
                "routines": [r.to_dict() for r in rows],
                "counts": [{"org": o, "uid": u, "count": n} for o, u, n in counts],
                "total": total,
                "truncated": total > len(rows),
            }
        )
        return
    table = [
        [
            f"{r.org}/{r.uid}",
            r.routine_id,
            r.kind,
            ", ".join(r.state_names)
            + (f" ({r.paused_reason or r.disabled_reason})" if r.paused_reason or r.disabled_reason else ""),
            r.next_due_at.isoformat() if r.next_due_at else "-",
            missed.shown(r.fires_missed, r.fires_missed_capped),
            r.consecutive_failures,
            r.last_error or "",
            provenance.shown_source(r.source, r.source_entry),
        ]
        for r in rows
    ]
    columns = ["scope", "id", "kind", "state", "next due (UTC)", "missed fires", "failures", "last error", "source"]
    shown = f" (first {len(rows)})" if total > len(rows) else ""
    print_table(f"routines of every scope{shown}", columns, table)
    print_table(f"per scope ({total} in all)", ["scope", "routines"], [(f"{o}/{u}", n) for o, u, n in counts])


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
    now = obj.settings.now()
    overlap = _overlap_fields(obj, r)
    if as_json:
        emit_json({**routine_json(r, now), **overlap})
        return
    rows = [(k, plain_value(v)) for k, v in r.to_dict().items()]
    rows.append(("state", state_text(r, now)))
    rows.append(("last run (fire, state)", _last_run_text(last_scheduled_run(obj.store(), r.scope, r.routine_id))))
    rows.append(("overlap", overlap["overlap"]))
    rows.append(("buffered run", overlap["buffered_run"] or "-"))
    print_table(f"routine {r.key}", ["field", "value"], rows)


def _overlap_fields(obj: CliContext, r: Routine) -> dict[str, Any]:
    """The overlap policy (``skip`` / ``latest``) and the run id of the routine's buffered fire (or None)."""
    try:
        mode = policy_of(r.schedule).overlap
    except AlmaScheduleError:  # a stored schedule this version cannot read: say so, show the rest
        mode = "unreadable"
    waiting = obj.store().list_runs(r.scope, routine_id=r.routine_id, state=RunState.BUFFERED, limit=1)
    return {"overlap": mode, "buffered_run": waiting[0].run_id if waiting else None}


_PAST = {"disable": "disabled", "enable": "enabled", "pause": "paused", "resume": "resumed", "delete": "deleted"}


def _lever(name: str, doc: str) -> None:
    @routines.command(name, help=doc)
    @click.argument("scope")
    @click.argument("routine_id")
    @click.option("--reason", default="manual", help="Pause reason (pause only).", hidden=name != "pause")
    @actor_option
    @json_option
    @click.pass_obj
    @handle_errors
    def lever(obj: CliContext, scope: str, routine_id: str, reason: str, actor: str | None, as_json: bool) -> None:
        sc = Scope.parse(scope)
        who = cli_actor(actor)
        schedule = build_schedule(obj, sends=name == "trigger")
        result: Any
        if name == "pause":
            result = schedule.pause(sc, routine_id, reason, actor=who)
        else:
            result = getattr(schedule, name)(sc, routine_id, actor=who)
        if as_json:
            emit_json(result.to_dict())
        elif name == "trigger":
            click.echo(terminal_text(f"triggered {result.key} ({result.state})"))
        else:
            click.echo(terminal_text(f"{_PAST[name]} {sc}/{routine_id}"))


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
    """Preview a routine's next fires in UTC and its zone (jitter applied), DST transitions marked
    (inside its not_before / not_after bounds, and no more than its max_runs still allows).

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
