"""``alma-schedule import-beat MODULE:APP ORG/UID [--apply] [--track --deadline 1h]``: migrate a
``beat_schedule`` to routines.

docs/architecture.md, section "The modules, in detail" (cli/beat_cmds.py).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.history import actor_option, cli_actor

if TYPE_CHECKING:
    from alma_schedule.beat.importer import Applied, ImportPlan


def _load(app_path: str) -> Any:
    from alma_schedule.runners.task import load_celery_app

    cwd = os.getcwd()
    if cwd not in sys.path:  # like `celery -A`: the app module is found from the working directory
        sys.path.insert(0, cwd)
    return load_celery_app(app_path, setting="MODULE:APP")


@click.command("import-beat")
@click.argument("app_path", metavar="MODULE:APP")
@click.argument("scope_text", metavar="ORG/UID")
@click.option("--apply", "do_apply", is_flag=True, help="Register the converted entries (default: show only).")
@click.option("--track", is_flag=True, help="Tracked routines: follow each fleet task's result (needs --deadline).")
@click.option("--deadline", default=None, help="How long a tracked run waits for its task's result (1h, 30m, ...).")
@actor_option
@json_option
@click.pass_obj
@handle_errors
def import_beat(
    obj: CliContext,
    app_path: str,
    scope_text: str,
    do_apply: bool,
    track: bool,
    deadline: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Show (then, with --apply, register) the task routines equivalent to MODULE:APP's beat_schedule.

    Every entry is listed: converted as what, or refused and why (Celery's crontab ANDs
    day-of-month and day-of-week where cron ORs them; solar and custom schedule classes have no
    equivalent; fractional seconds are refused); each warning follows on its own line. Beat
    anchors intervals on the last run, alma-schedule on registration. Running it twice creates
    nothing new. Untracked routines (the default) end completed(sent): the task was SENT, its own
    outcome is not known; --track --deadline 1h follows it (the app needs a stored result backend).

    \b
    Example:
      alma-schedule import-beat proj.celery:app acme/ops
      alma-schedule --database-url postgresql+psycopg://... import-beat proj.celery:app acme/ops --apply
      alma-schedule import-beat proj.celery:app acme/ops --track --deadline 1h --apply
    """
    from alma_schedule.beat.importer import apply_import, plan_import, plan_warnings
    from alma_schedule.model import Scope
    from alma_schedule.policies.allow import TaskAllow

    scope = Scope.parse(scope_text)
    _check_tracking(track, deadline)
    app = _load(app_path)
    allow = TaskAllow.from_settings(obj.settings)
    plan = plan_import(app, scope, track=track, deadline=deadline, allow=allow)
    warnings = plan_warnings(plan, obj.settings.tick_period)
    applied = None
    if do_apply:
        from alma_schedule.engine import create_scheduler
        from alma_schedule.runners.task import TaskRunner

        schedule = create_scheduler(store=obj.store(), runner=TaskRunner(app, allow=allow), settings=obj.settings)
        applied = apply_import(schedule, plan, actor=cli_actor(actor))
    if as_json:
        out = plan.to_dict()
        out["applied"] = None if applied is None else [a.to_dict() for a in applied]
        out["warnings"] = warnings
        emit_json(out)
        return
    render_import(plan, warnings, applied, track=track)


def render_import(plan: ImportPlan, warnings: list[str], applied: list[Applied] | None, *, track: bool) -> None:
    """Print an import's table, its warnings and its closing line (``import-beat``, and the demo)."""
    from alma_schedule.beat.convert import ANCHOR_NOTE

    scope = plan.scope
    columns = ["entry", "task", "beat schedule", "becomes", "refused / notes"]
    if applied is not None:
        columns.append("applied")
    rows = []
    for i, conv in enumerate(plan.conversions):
        notes = [n for n in conv.notes if n != ANCHOR_NOTE and not n.startswith("read in ")]
        if any(n == ANCHOR_NOTE for n in conv.notes):
            notes.append("anchored on registration (*)")
        why = conv.refused if conv.refused else "; ".join(notes)
        row: list[Any] = [conv.name, conv.task or "-", conv.beat, conv.converted_as, why]
        if applied is not None:
            a = applied[i]
            row.append(a.outcome + (f" ({a.detail})" if a.detail and a.outcome != "refused" else ""))
        rows.append(row)
    zone = f"{plan.zone.zone}: {plan.zone.source}" if plan.zone.zone else "unknown"
    print_table(f"beat_schedule of {plan.app} -> task routines of {scope} (crontabs in {zone})", columns, rows)
    if warnings:
        click.echo("warnings:")
        for line in warnings:
            click.echo(f"  {'(*) ' if line.startswith('anchoring (') else ''}{line}")
    n_ok, n_refused = len(plan.converted), len(plan.refused)
    if n_ok and not track:
        click.echo(
            "untracked: each run ends completed(sent) once the task is SENT; the fleet task's own "
            "outcome is not known (--track --deadline 1h follows it)."
        )
    if applied is None:
        click.echo(f"{n_ok} entries convert, {n_refused} refused. Nothing written: add --apply to register them.")
    else:
        counts = {k: sum(1 for a in applied if a.outcome == k) for k in ("created", "updated", "unchanged", "refused")}
        click.echo(", ".join(f"{v} {k}" for k, v in counts.items()) + f" in {scope}.")


def _check_tracking(track: bool, deadline: str | None) -> None:
    from alma_schedule.errors import InvalidInput
    from alma_schedule.runners.task import TaskDefinition

    if track and deadline is None:
        raise InvalidInput("--track needs --deadline (e.g. --deadline 1h): how long a run waits for its task's result")
    if deadline is not None and not track:
        raise InvalidInput("--deadline applies only with --track")
    if track:
        try:
            TaskDefinition.parse({"task": "beat.entry", "track": True, "deadline": deadline})
        except InvalidInput as exc:
            raise InvalidInput(f"--deadline {deadline!r}: {exc}") from None


@click.group("beat")
def beat() -> None:
    """The fleet's own ``celery beat`` as the clock (``install(app, beat_clock=True)``)."""


@beat.command("sync")
@click.option("--dry-run", is_flag=True, help="Show what the sync would change; write nothing.")
@json_option
@click.pass_obj
@handle_errors
def beat_sync(obj: CliContext, dry_run: bool, as_json: bool) -> None:
    """Sync the fleet app's beat_schedule into its routines, as beat's start does (-A names the app).

    Each entry that converts becomes (or updates) the routine of that id in alma_beat_sync_scope
    (default beat/<app main name>); the routine of an entry gone from the code is disabled
    (alma_beat_sync_prune = "delete": deleted). An operator's pause or disable is kept.

    \b
    Example:
      alma-schedule -A proj beat sync --dry-run
    """
    from alma_schedule.beat.sync import apply_sync, plan_changes, plan_sync, summary, sync_scope
    from alma_schedule.errors import InvalidInput
    from alma_schedule.policies.allow import TaskAllow

    app = obj.app()
    if app is None:
        raise InvalidInput("beat sync needs the fleet's Celery app: pass -A MODULE:APP (or set ALMA_CELERY_APP)")
    settings = obj.settings
    plan = plan_sync(
        app, sync_scope(app, settings), prune=settings.beat_sync_prune, allow=TaskAllow.from_settings(settings)
    )
    if dry_run:
        changes = plan_changes(obj.store(), plan, settings.now())
    else:
        from alma_schedule.engine import create_scheduler
        from alma_schedule.runners.task import TaskRunner

        schedule = create_scheduler(
            store=obj.store(), runner=TaskRunner(app, allow=TaskAllow.from_settings(settings)), settings=settings
        )
        changes = apply_sync(schedule, plan, settings.now())
    if as_json:
        emit_json(
            {
                "scope": str(plan.scope),
                "dry_run": dry_run,
                "changes": [c.to_dict() for c in changes],
                "kept_in_beat": [{"name": n, "why": w} for n, w in plan.kept],
            }
        )
        return
    title = f"beat_schedule of {plan.app} -> {plan.scope}" + (" (dry run: nothing written)" if dry_run else "")
    print_table(title, ["entry", "change", "detail"], [[c.name, c.action, c.detail or ""] for c in changes])
    for name, why in plan.kept:
        click.echo(f"stays in beat: {name} ({why})")
    click.echo(("would: " if dry_run else "") + summary(changes) + ".")


def register(group: click.Group) -> None:
    group.add_command(import_beat)
    group.add_command(beat)
