"""``alma-schedule routines backfill | describe``: the operator's range of past fires, and one
routine in one view.

docs/architecture.md, section "The modules, in detail" (cli/routines_ops.py).
"""

from __future__ import annotations

from typing import Any

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.history import actor_option, cli_actor
from alma_schedule.cli.wiring import build_schedule, parse_instant
from alma_schedule.engine.backfill import DEFAULT_MAX_FIRES
from alma_schedule.errors import InvalidInput
from alma_schedule.model import Scope, provenance
from alma_schedule.policies import missed


@click.command("backfill")
@click.argument("scope")
@click.argument("routine_id")
@click.option("--from", "start", help="The first fire instant of the range (ISO 8601 with an offset).")
@click.option("--to", "end", help="The last fire instant of the range (inclusive; not in the future).")
@click.option(
    "--max",
    "max_fires",
    default=DEFAULT_MAX_FIRES,
    show_default=True,
    type=click.IntRange(1),
    help="Refuse a range holding more fires than this.",
)
@click.option("--cancel", is_flag=True, help="Cancel the routine's backfill (its claimed run: skipped(operator)).")
@actor_option
@json_option
@click.pass_obj
@handle_errors
def backfill(
    obj: CliContext,
    scope: str,
    routine_id: str,
    start: str | None,
    end: str | None,
    max_fires: int,
    cancel: bool,
    actor: str | None,
    as_json: bool,
) -> None:
    """Run the past fires of a range that have no run row, one per tick (an operator action).

    Only fires after the routine's registration (and after what `prune` deleted) and up to its
    cursor are run; a range outside those bounds, in the future, over --max fires, or on a paused
    or disabled routine is refused, naming the bound and the count.

    \b
    Example:
      alma-schedule routines backfill acme/alice briefing --from 2026-11-28T00:00:00Z --to 2026-11-30T23:59:59Z
      alma-schedule routines backfill acme/alice briefing --cancel
    """
    sc = Scope.parse(scope)
    who = cli_actor(actor)
    schedule = build_schedule(obj)
    if cancel:
        if start or end:
            raise InvalidInput("--cancel takes no --from / --to")
        row, skipped = schedule.cancel_backfill(sc, routine_id, actor=who)
        if as_json:
            emit_json({"backfill": row.to_dict(), "skipped": None if skipped is None else skipped.to_dict()})
            return
        also = f"; its claimed run {skipped.run_id} is skipped(operator)" if skipped is not None else ""
        click.echo(f"cancelled the backfill of {sc}/{routine_id}{also}")
        return
    if not start or not end:
        raise InvalidInput("backfill needs --from and --to (or --cancel)")
    receipt = schedule.backfill(
        sc, routine_id, parse_instant(start), parse_instant(end), max_fires=max_fires, actor=who
    )
    if as_json:
        emit_json(receipt.to_dict())
        return
    click.echo(
        f"backfill of {sc}/{routine_id}: {receipt.fires} fire(s) to run, {receipt.first.isoformat()} .. "
        f"{receipt.last.isoformat()} ({receipt.already_run} already have a run row); one per tick"
    )


def _run_row(r: Any) -> list[Any]:
    took = f"{r.duration_s:.1f}s" if r.duration_s is not None else "-"
    lag = f"{r.lag_s:.1f}s" if r.lag_s is not None else "-"
    return [r.run_id, r.origin, r.state, r.reason or "", took, lag]


@click.command("describe")
@click.argument("scope")
@click.argument("routine_id")
@click.option(
    "-n",
    "count",
    default=5,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="How many next fires and last runs to show.",
)
@json_option
@click.pass_obj
@handle_errors
def describe(obj: CliContext, scope: str, routine_id: str, count: int, as_json: bool) -> None:
    """One routine in one view: schedule and policies, state, missed fires, next fires, last runs, backfill.

    \b
    Example:
      alma-schedule routines describe acme/alice briefing --json
    """
    view = build_schedule(obj).describe(Scope.parse(scope), routine_id, fires=count, runs=count)
    if as_json:
        emit_json(view.to_dict())
        return
    reason = view.paused_reason or (view.disabled_reason if view.state == "disabled" else None)
    state = view.state + (f" ({reason})" if reason else "")
    if view.erroring:
        state += f", erroring: {view.last_error} (next attempt {view.defer_until})"
    head = [
        ("kind", view.kind),
        ("schedule", view.schedule),
        *((f"policy {k}", "-" if v is None else v) for k, v in view.policies.items()),
        ("state", state),
        ("source", provenance.shown_source(view.source, view.source_entry)),
        ("failure streak", f"{view.streak} of {view.failure_threshold or 'never'}"),
        ("registered at / cursor", f"{view.registered_at.isoformat()} / {view.last_fire}"),
        ("missed fires (never claimed)", missed.shown(view.fires_missed, view.fires_missed_capped)),
        ("next due (UTC)", view.next_due_at),
        ("pruned through", view.pruned_through),
        ("blocking run", "-" if view.blocking is None else f"{view.blocking.run_id} ({view.blocking.state})"),
        ("buffered run", "-" if view.buffered is None else view.buffered.run_id),
    ]
    if view.backfill is not None:
        b = view.backfill
        status = (
            "pending, next " + str(b["next_at"]) if b["pending"] else ("cancelled" if b["cancelled_at"] else "done")
        )
        head.append(("backfill", f"{b['from_at']} .. {b['to_at']} ({status})"))
    head.extend(("note", n) for n in view.notes)
    print_table(f"routine {view.key}", ["field", "value"], [(k, "-" if v is None else v) for k, v in head])
    print_table(
        "next fires",
        ["due (UTC, jitter applied)", "local", "zone", "note"],
        [(f.utc.isoformat(), f.local.isoformat(), f.zone, f.note or "") for f in view.next_fires],
    )
    columns = ["run", "origin", "state", "reason", "took", "lag"]
    print_table("last runs", columns, [_run_row(r) for r in view.recent_runs])
