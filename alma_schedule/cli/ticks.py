"""``alma-schedule plan | tick | reindex``: what a tick would do, one tick, and re-deriving the index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from alma_schedule.cli.context import CliContext, emit_json, fail, handle_errors, json_option, print_table
from alma_schedule.cli.terminal import terminal_text
from alma_schedule.cli.wiring import build_schedule, is_embedded, parse_instant
from alma_schedule.policies import missed
from alma_schedule.run_queue_watch import unconsumed


@click.command("plan")
@click.option("--at", "at", default=None, help="The instant to plan for (default now; any instant).")
@json_option
@click.pass_obj
@handle_errors
def plan(obj: CliContext, at: str | None, as_json: bool) -> None:
    """What a tick at an instant would claim, re-send, poll and skip, and why. Writes nothing.

    "missed" is how many fires each claim would collapse (no run row: counted on the routine,
    "routines list"'s "missed fires"), never those of a pause, a disable or a schedule change.

    \b
    Example:
      alma-schedule plan --at 2026-12-01T08:00:00Z
    """
    schedule = build_schedule(obj)
    p = schedule.plan(now=parse_instant(at) if at else None)
    idle = unconsumed(schedule.store, p.at, obj.settings)
    if as_json:
        emit_json({**p.to_dict(), "run_queue": idle})
        return
    click.echo(f"plan at {p.at.isoformat()}")
    _section(
        "due",
        ["routine", "run", "due (UTC, jitter applied)", "action", "missed", "why"],
        [
            (
                f"{d.org}/{d.uid}/{d.routine_id}",
                d.run_id,
                (d.due_at or d.fire_at).isoformat(),
                d.action,
                missed.shown(d.fires_missed, d.fires_missed >= missed.CAP),
                d.why,
            )
            for d in p.due
        ],
    )
    _section("re-send", ["run"], [(str(k),) for k in p.resends])
    _section("expire (skipped: missed)", ["run"], [(str(k),) for k in p.expiring])
    _section(
        "poll (collect)",
        ["routine", "collect_run_id"],
        [(e.get("routine", ""), e.get("collect_run_id", "")) for e in p.polls],
    )
    _section("skipped", ["routine", "why"], [(f"{s.org}/{s.uid}/{s.routine_id}", s.why) for s in p.skipped])
    _section("paused / disabled", ["routine", "why"], [(f"{s.org}/{s.uid}/{s.routine_id}", s.why) for s in p.inactive])
    whys = p.blocked_why or ("",) * len(p.blocked)
    _section("blocked (stuck runs)", ["run", "why"], list(zip((str(k) for k in p.blocked), whys, strict=True)))
    _section(
        f"cannot be planned ({p.erroring_count} in all)" if p.erroring_count else "cannot be planned",
        ["routine", "error", "next attempt"],
        [(e.routine, e.error, e.until.isoformat() if e.until else "") for e in p.errors],
    )
    click.echo(f"next wake: {p.next_wake_at.isoformat() if p.next_wake_at else 'nothing is due'}")
    if idle is not None:
        click.echo(terminal_text(f"warning: {idle}"))


def _section(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plan section as a table, or one line ``<title>: none`` when it is empty."""
    if rows:
        print_table(title, columns, rows)
    else:
        click.echo(f"{title}: none")


@click.command("tick")
@click.option("--at", "at", default=None, help="Tick at this instant (a future instant: embedded store only).")
@click.option("--in-process", is_flag=True, help="Run the tick here even on a production store.")
@json_option
@click.pass_obj
@handle_errors
def tick(obj: CliContext, at: str | None, in_process: bool, as_json: bool) -> None:
    """Run one tick. Embedded store: in-process. Production store: sends one tick through Celery
    (through the -A app when it called install(app); a memory:// broker is refused).

    \b
    Examples:
      alma-schedule tick                  # on PostgreSQL: enqueue one tick for the tick worker
      alma-schedule tick --in-process     # claim and dispatch from here
    """
    settings = obj.settings
    embedded = is_embedded(settings)
    when = parse_instant(at) if at else None
    if when is not None and not embedded and when > settings.now() + settings.clock_tolerance:
        fail("--at a future instant is only for the embedded store (a production tick never claims early)")
    if not embedded and not in_process:
        from alma_schedule.clock import send_tick

        task_id = send_tick(settings, now=when, app=obj.sender_app())
        if as_json:
            emit_json({"task_id": task_id})
        else:
            click.echo(f"sent tick {task_id}")
        return
    if when is not None and embedded:
        obj.use_settings(settings.replace(time_source=lambda: when))
    # in-process on a production store sends what it claims: the memory:// broker is refused first
    schedule = build_schedule(obj, sends=not embedded)
    report = schedule.tick(now=when)
    d = report.to_dict()
    idle = unconsumed(schedule.store, report.at, settings)
    if as_json:
        emit_json({**d, "run_queue": idle})
        return
    click.echo(
        f"tick at {d['at']}: claimed {d['claimed']}, resent {d['resent']}, collect {d['collect']}, "
        f"skipped {d['skipped']}, missed fires {d['fires_missed']}, blocked {d['blocked']}, "
        f"runs pruned {d['runs_pruned']}, errors {d['errors']} "
        f"({d['erroring']} routine(s) cannot be planned), next wake {d['next_wake_at'] or 'none'}"
    )
    for e in d["ids"]["errors"]:
        attempt = f" (next attempt {e['until']})" if e.get("until") else ""
        click.echo(terminal_text(f"  error: {e['routine']}: {e['error']}{attempt}"))
    if idle is not None:
        click.echo(terminal_text(f"warning: {idle}"))


@click.command("reindex")
@json_option
@click.pass_obj
@handle_errors
def reindex(obj: CliContext, as_json: bool) -> None:
    """Re-derive every routine's next_due_at (e.g. after a tzdata update). System operation.

    \b
    Example:
      alma-schedule reindex --json
    """
    n = build_schedule(obj).reindex()
    if as_json:
        emit_json({"changed": n})
        return
    click.echo(f"reindexed: {n} routine(s) changed")


def register(group: click.Group) -> None:
    for c in (plan, tick, reindex):
        group.add_command(c)
