"""``alma-schedule import-dcb --from URL ORG/UID`` and ``import-redbeat --redis URL ORG/UID``: bring
django-celery-beat's and RedBeat's schedules along, with their last runs (dry run unless ``--apply``).

docs/architecture.md, section "The modules, in detail" (cli/import_cmds.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.history import actor_option, cli_actor

if TYPE_CHECKING:
    from alma_schedule.beat.importer import Applied
    from alma_schedule.importers.common import SourcePlan

KEPT = "in the app's beat_schedule: the beat sync owns it"


def _zone(tz: str | None) -> str | None:
    from alma_schedule.core.zones import check_zone
    from alma_schedule.errors import InvalidInput, InvalidSchedule

    if tz is None:
        return None
    try:
        return check_zone(tz)
    except InvalidSchedule as exc:
        raise InvalidInput(f"--tz {tz!r}: {exc}") from None


def _fleet(obj: CliContext) -> tuple[Any, Any, dict[str, str]]:
    """The fleet app (or None), its task runner (the allow-lists) and its beat_schedule's names."""
    from alma_schedule.policies.allow import TaskAllow
    from alma_schedule.runners.task import TaskRunner

    app = obj.app()
    if app is None:
        return None, None, {}
    runner = TaskRunner(app, allow=TaskAllow.from_settings(obj.settings))
    return app, runner, {str(name): KEPT for name in (app.conf.beat_schedule or {})}


def _finish(
    obj: CliContext, plan: SourcePlan, runner: Any, do_apply: bool, as_json: bool, actor: str | None = None
) -> None:
    from alma_schedule.errors import InvalidInput

    applied = None
    if do_apply:
        from alma_schedule.engine import create_scheduler
        from alma_schedule.importers.common import apply_plan

        if runner is None:
            raise InvalidInput(
                f"{plan.command} --apply needs the fleet's Celery app (the task routines' runner): pass -A MODULE:APP"
            )
        schedule = create_scheduler(store=obj.store(), runner=runner, settings=obj.settings)
        applied = apply_plan(schedule, plan, now=obj.settings.now(), actor=cli_actor(actor))
    if as_json:
        out = plan.to_dict()
        out["applied"] = None if applied is None else [a.to_dict() for a in applied]
        emit_json(out)
        return
    render(plan, applied, checked=runner is not None)


def render(plan: SourcePlan, applied: list[Applied] | None, *, checked: bool) -> None:
    """The dry-run table (each entry, what it becomes or why not), then the closing line."""
    columns = ["entry", "task", "was", "becomes", "last run (cursor)", "refused / skipped / notes"]
    if applied is not None:
        columns.append("applied")
    rows = []
    for i, e in enumerate(plan.entries):
        why = e.refused or e.skipped or "; ".join(e.notes)
        row: list[Any] = [e.name, e.task or "-", e.was, e.becomes, e.cursor.isoformat() if e.cursor else "-", why]
        if applied is not None:
            a = applied[i]
            row.append(a.outcome + (f" ({a.detail})" if a.detail and a.outcome in ("created", "updated") else ""))
        rows.append(row)
    title = f"{plan.command}: {plan.source} -> task routines of {plan.scope}"
    print_table(title, columns, rows)
    click.echo(f"times without a zone read in {plan.zone}: {plan.zone_source}")
    if not checked:
        click.echo("not checked against the fleet app (no -A): unknown tasks and the allow-lists show at --apply.")
    n_ok = len(plan.converted)
    n_skipped = sum(1 for e in plan.entries if e.skipped)
    n_refused = len(plan.entries) - n_ok - n_skipped
    if applied is None:
        click.echo(
            f"{n_ok} entries convert, {n_refused} refused, {n_skipped} skipped. "
            "Nothing written: add --apply to register them (one transaction)."
        )
        return
    kinds = ("created", "updated", "unchanged", "refused", "skipped")
    counts = {k: sum(1 for a in applied if a.outcome == k) for k in kinds}
    click.echo(", ".join(f"{v} {k}" for k, v in counts.items()) + f" in {plan.scope}. The source was not written to.")


@click.command("import-dcb")
@click.option("--from", "url", required=True, metavar="URL", help="django-celery-beat's database (SQLAlchemy URL).")
@click.argument("scope_text", metavar="ORG/UID")
@click.option("--tz", default=None, help="The zone of naive datetimes (default: the crontabs' timezone, else UTC).")
@click.option("--apply", "do_apply", is_flag=True, help="Register the convertible entries (default: show only).")
@actor_option
@json_option
@click.pass_obj
@handle_errors
def import_dcb(
    obj: CliContext, url: str, scope_text: str, tz: str | None, do_apply: bool, actor: str | None, as_json: bool
) -> None:
    """Show (then, with --apply, register in one transaction) django-celery-beat's periodic tasks as routines.

    Read straight from its tables (PostgreSQL, SQLite, MySQL/MariaDB; no Django), never written
    to. Each task's last_run_at becomes its routine's cursor (NULL: date_changed), so nothing
    replays and nothing due is skipped. With -A, the names the app's beat_schedule holds are
    skipped (the beat sync owns them) and each task is checked against the app and allow-lists.

    \b
    Example:
      alma-schedule -A proj import-dcb --from postgresql+psycopg://u@db/django acme/ops
      alma-schedule -A proj import-dcb --from sqlite:///db.sqlite3 acme/ops --tz UTC --apply
    """
    from alma_schedule.importers.dcb import plan_dcb
    from alma_schedule.model import Scope

    scope = Scope.parse(scope_text)
    zone = _zone(tz)
    _, runner, kept = _fleet(obj)
    plan = plan_dcb(url, scope, tz=zone, runner=runner, kept=kept, now=obj.settings.now())
    _finish(obj, plan, runner, do_apply, as_json, actor)


@click.command("import-redbeat")
@click.option("--redis", "url", required=True, metavar="URL", help="RedBeat's Redis (redis://host:6379/0).")
@click.argument("scope_text", metavar="ORG/UID")
@click.option("--key-prefix", default=None, help="RedBeat's key prefix (default: the app's redbeat_key_prefix).")
@click.option("--tz", default=None, help="The zone of crontabs (default: the app's timezone, else UTC).")
@click.option("--apply", "do_apply", is_flag=True, help="Register the convertible entries (default: show only).")
@actor_option
@json_option
@click.pass_obj
@handle_errors
def import_redbeat(
    obj: CliContext,
    url: str,
    scope_text: str,
    key_prefix: str | None,
    tz: str | None,
    do_apply: bool,
    actor: str | None,
    as_json: bool,
) -> None:
    """Show (then, with --apply, register in one transaction) RedBeat's entries as routines.

    Reads the <prefix><name> hashes listed in <prefix>:schedule, never writes. Each entry's
    last_run_at becomes its routine's cursor. RedBeat stores no zone: crontabs read in --tz.
    Statics (entries RedBeat saved from beat_schedule) are skipped: the beat sync owns them.

    \b
    Example:
      alma-schedule -A proj import-redbeat --redis redis://localhost:6379/1 acme/ops --apply
    """
    from alma_schedule.importers.redbeat import DEFAULT_PREFIX, plan_redbeat
    from alma_schedule.model import Scope

    scope = Scope.parse(scope_text)
    zone = _zone(tz)
    app, runner, kept = _fleet(obj)
    source = "--tz"
    if zone is None and app is not None:
        from alma_schedule.beat.convert import app_zone
        from alma_schedule.beat.importer import system_local_zone

        found = app_zone(app.conf.timezone, bool(app.conf.enable_utc), system_local_zone())
        zone, source = found.zone, f"the app's {found.source}"
    if zone is None:
        source = "UTC: RedBeat stores no zone (--tz)"
    prefix = (
        key_prefix or (getattr(app.conf, "redbeat_key_prefix", None) if app is not None else None) or DEFAULT_PREFIX
    )
    plan = plan_redbeat(
        url, scope, prefix=prefix, tz=zone, zone_source=source, runner=runner, kept=kept, now=obj.settings.now()
    )
    _finish(obj, plan, runner, do_apply, as_json, actor)


def register(group: click.Group) -> None:
    group.add_command(import_dcb)
    group.add_command(import_redbeat)
