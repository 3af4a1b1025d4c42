"""``alma-schedule import-beat MODULE:APP ORG/UID [--apply]``: migrate a ``beat_schedule`` to routines.

Without ``--apply`` it writes nothing: a table of every entry, converted as what or refused and why.
With ``--apply`` each converted entry is registered (kind ``task``) in the store of
``--database-url`` / ``ALMA_DATABASE_URL``; running it again creates nothing new.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table


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
@json_option
@click.pass_obj
@handle_errors
def import_beat(obj: CliContext, app_path: str, scope_text: str, do_apply: bool, as_json: bool) -> None:
    """Show (then, with --apply, register) the task routines equivalent to MODULE:APP's beat_schedule.

    Every entry is listed: converted as what, or refused and why (Celery's crontab ANDs
    day-of-month and day-of-week where cron ORs them; solar and custom schedule classes have no
    equivalent; fractional seconds are refused). Beat anchors intervals on the last run,
    alma-schedule on registration. Running it twice creates nothing new.

    \b
    Example:
      alma-schedule import-beat proj.celery:app acme/ops
      alma-schedule --database-url postgresql+psycopg://... import-beat proj.celery:app acme/ops --apply
    """
    from alma_schedule.beat.convert import ANCHOR_NOTE
    from alma_schedule.beat.importer import apply_import, plan_import
    from alma_schedule.model import Scope

    scope = Scope.parse(scope_text)
    app = _load(app_path)
    plan = plan_import(app, scope)
    applied = None
    if do_apply:
        from alma_schedule.engine import create_schedule
        from alma_schedule.runners.task import TaskRunner

        schedule = create_schedule(store=obj.store(), runner=TaskRunner(app), settings=obj.settings)
        applied = apply_import(schedule, plan)
    if as_json:
        out = plan.to_dict()
        out["applied"] = None if applied is None else [a.to_dict() for a in applied]
        emit_json(out)
        return
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
    if any(ANCHOR_NOTE in c.notes for c in plan.conversions):
        click.echo(f"(*) {ANCHOR_NOTE}.")
    n_ok, n_refused = len(plan.converted), len(plan.refused)
    if applied is None:
        click.echo(f"{n_ok} entries convert, {n_refused} refused. Nothing written: add --apply to register them.")
    else:
        counts = {k: sum(1 for a in applied if a.outcome == k) for k in ("created", "updated", "unchanged", "refused")}
        click.echo(", ".join(f"{v} {k}" for k, v in counts.items()) + f" in {scope}.")


def register(group: click.Group) -> None:
    group.add_command(import_beat)
