"""``alma-schedule runs ...``: the ledger, stuck runs, reconciliation, erasure and pruning."""

from __future__ import annotations

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.history import actor_option, cli_actor
from alma_schedule.cli.wiring import build_schedule, parse_instant
from alma_schedule.errors import InvalidInput, NotFound, RegistrationRefused
from alma_schedule.model import NON_TERMINAL, REASONS, TERMINAL, WAITING, RunRecord, RunState, Scope
from alma_schedule.policies.blocked import blocked_why, hard_limit_note
from alma_schedule.runners.governed.money import usd_to_micros
from alma_schedule.settings import parse_duration

SENT_NOTE = (
    "completed(sent): the task was SENT (untracked: the fleet task's own outcome is not known; "
    'a task routine with "track": true follows it)'
)
RUN_COLUMNS = ["routine", "run", "origin", "state", "reason", "fire (UTC)", "state since", "cost µ$", "error"]


def run_row(r: RunRecord, *, scoped: bool = True) -> list[object]:
    return [
        r.routine_id if scoped else f"{r.org}/{r.uid}/{r.routine_id}",
        r.run_id,
        r.origin,
        r.state,
        r.reason or "",
        r.fire_at.isoformat(),
        r.state_at.isoformat(),
        r.cost_micros,
        r.error_class or "",
    ]


@click.group("runs")
def runs() -> None:
    """The run ledger: list, stuck, overdue, record (reconcile), erase, prune."""


@runs.command("list")
@click.argument("scope")
@click.option("--routine", "routine_id", default=None, help="Only this routine.")
@click.option("--state", type=click.Choice([s.value for s in RunState]), default=None)
@click.option("--since", default=None, help="Only fires at or after this ISO instant.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@json_option
@click.pass_obj
@handle_errors
def list_(
    obj: CliContext, scope: str, routine_id: str | None, state: str | None, since: str | None, limit: int, as_json: bool
) -> None:
    """The ledger of a scope, newest first.

    \b
    Example:
      alma-schedule runs list acme/alice --routine briefing --state failed --since 2026-11-01T00:00:00Z
    """
    sc = Scope.parse(scope)
    rows = obj.store().list_runs(
        sc, routine_id=routine_id, state=state, since=parse_instant(since) if since else None, limit=limit
    )
    if as_json:
        emit_json([r.to_dict() for r in rows])
        return
    print_table(f"runs of {sc}", RUN_COLUMNS, [run_row(r) for r in rows])
    if any(r.reason == "sent" for r in rows):
        click.echo(SENT_NOTE)


@runs.command("stuck")
@click.option(
    "--older-than",
    default=None,
    help="Minimum age in the current state [default: 2 x ALMA_RUN_TIME_LIMIT, what a tick calls blocked].",
)
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@json_option
@click.pass_obj
@handle_errors
def stuck(obj: CliContext, older_than: str | None, limit: int, as_json: bool) -> None:
    """Runs waiting in running / submitted / collecting (system-wide): what needs an operator.

    A run is stuck when it has been in its state longer than --older-than (default twice
    ALMA_RUN_TIME_LIMIT, the age at which a tick reports it as blocked), and a submitted run past
    its deadline is stuck whatever --older-than says; so is a running run marked blocked at once
    (an uncertain provider outcome, a lost worker, a time limit: the "why" column). A running run
    started longer ago than the run task's hard limit (ALMA_RUN_TIME_LIMIT + 30 s) says "past its
    hard limit" in the "note" column: information only, never a verdict.

    `running` is never expired or retried automatically: check the provider, the batch and the
    destination, then `runs record` the outcome.

    \b
    Example:
      alma-schedule runs stuck --older-than 30m
    """
    settings = obj.settings
    age = parse_duration("--older-than", older_than) if older_than is not None else 2 * settings.run_time_limit
    now = settings.now()
    store = obj.store()
    found = {r.key: r for r in store.stuck(now, age, limit)}
    for r in store.blocked(now, settings.run_time_limit, limit):
        if r.blocked_at is not None or (r.state == RunState.SUBMITTED and r.deadline is not None and now > r.deadline):
            found.setdefault(r.key, r)
    rows = sorted(found.values(), key=lambda r: (r.state_at, str(r.key)))[:limit]
    limit_of_run = settings.run_time_limit
    if as_json:
        emit_json(
            [{**r.to_dict(), "why": blocked_why(r, now), "note": hard_limit_note(r, now, limit_of_run)} for r in rows]
        )
        return
    label = older_than or f"{age.total_seconds():g}s"
    title = f"runs stuck longer than {label} (or blocked at once, or submitted past their deadline)"
    if not rows:
        click.echo(f"{title}: none")
        return
    table = [
        [*run_row(r, scoped=False), blocked_why(r, now), hard_limit_note(r, now, limit_of_run) or ""] for r in rows
    ]
    print_table(title, [*RUN_COLUMNS, "why", "note"], table)


@runs.command("overdue")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@json_option
@click.pass_obj
@handle_errors
def overdue(obj: CliContext, limit: int, as_json: bool) -> None:
    """Overdue fires (system-wide): routines with "expect" whose fire has not ended successfully
    within "expect" of its instant (at most one per routine, until a run succeeds).

    A fire with no run was never claimed (the routine's cursor is late: is the clock ticking?).
    "alert" says whether its ALMA_ALERT_WEBHOOK post was answered 2xx.

    \b
    Example:
      alma-schedule runs overdue --json
    """
    found = obj.store().overdue(obj.settings.now(), limit)
    if as_json:
        emit_json([{**f.to_dict(), "key": f.key} for f in found])
        return
    title = "overdue fires (expect)"
    if not found:
        click.echo(f"{title}: none")
        return
    table = [
        [
            f"{f.org}/{f.uid}/{f.routine_id}",
            f.fire_at.isoformat(),
            f.overdue_since.isoformat(),
            f.run_id or "(never claimed)",
            f.state or "",
            f.reason or "",
            "delivered" if f.delivered_at is not None else "",
        ]
        for f in found
    ]
    print_table(title, ["routine", "fire (UTC)", "overdue since", "run", "state", "reason", "alert"], table)


@runs.command("record")
@click.argument("scope")
@click.argument("routine_id")
@click.argument("run_id")
@click.option(
    "--outcome", required=True, type=click.Choice(sorted(str(s) for s in TERMINAL)), help="The terminal state."
)
@click.option(
    "--reason",
    default="reconciled",
    show_default=True,
    help=f"A closed reason code: {', '.join(sorted(REASONS))}.",
)
@click.option(
    "--cost-usd",
    "cost_usd",
    default=None,
    help="What the run really cost, in USD (e.g. 0.0126: what the provider billed). "
    "[default: the run's stored cost; an uncertain run stored its whole bound]",
)
@actor_option
@json_option
@click.pass_obj
@handle_errors
def record(
    obj: CliContext,
    scope: str,
    routine_id: str,
    run_id: str,
    outcome: str,
    reason: str,
    cost_usd: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """The operator's final word on a non-terminal run (never resends). The run's reservation
    settles at the recorded cost: --cost-usd when given, else the run's stored cost (never 0 for
    a run whose provider outcome was uncertain: it stored its whole bound).

    Exit 1 when nothing was recorded (the run is unknown or already terminal), with --json too
    (the JSON result is printed first).

    \b
    Example:
      alma-schedule runs record acme/alice digest 2026-11-30T02:00:00Z --outcome failed --reason provider_error \\
        --cost-usd 0.0126
    """
    sc = Scope.parse(scope)
    cost = None if cost_usd is None else cost_usd_micros(cost_usd)
    who = cli_actor(actor)
    result = build_schedule(obj).record(sc, routine_id, run_id, outcome, reason, cost_micros=cost, actor=who)
    if as_json:
        emit_json(result.to_dict())  # printed either way; nothing recorded still exits 1 (below)
    if result.won:
        if not as_json:
            settled = result.record.cost_micros if result.record is not None else cost
            click.echo(f"recorded {sc}/{routine_id}/{run_id} as {outcome} ({reason}), settled at {settled} µ$")
        return
    if result.record is None:
        raise NotFound.of("run", f"{sc}/{routine_id}/{run_id}")
    raise InvalidInput(
        f"run {sc}/{routine_id}/{run_id} is {result.record.state}: "
        f"only {', '.join(sorted(NON_TERMINAL | WAITING))} runs can be recorded"
    )


@runs.command("erase")
@click.argument("scope")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
@handle_errors
def erase(obj: CliContext, scope: str, yes: bool) -> None:
    """Erase the result texts of a scope's runs and the payloads (reason, diff) of its routines' audit
    events, keeping who and when (an erasure wins over a pending delivery).

    \b
    Example:
      alma-schedule runs erase acme/alice --yes
    """
    sc = Scope.parse(scope)
    if not yes:
        click.confirm(f"erase every result text of {sc}?", abort=True)
    n = obj.store().erase_results(sc)
    click.echo(f"erased {n} result(s) of {sc}")


@runs.command("prune")
@click.option("--before", required=True, help="Delete terminal runs finished before this ISO instant.")
@click.pass_obj
@handle_errors
def prune(obj: CliContext, before: str) -> None:
    """Delete terminal runs finished before an instant (system-wide; non-terminal rows are kept).

    \b
    Example:
      alma-schedule runs prune --before 2026-01-01T00:00:00Z
    """
    n = obj.store().prune(parse_instant(before))
    click.echo(f"pruned {n} terminal run(s)")


def cost_usd_micros(value: str) -> int:
    """``--cost-usd``: a money string, checked by the one rule every amount in USD follows
    (:func:`alma_schedule.runners.governed.money.usd_to_micros`), refused as :class:`InvalidInput`
    naming the option."""
    try:
        return usd_to_micros("cost_usd", value)
    except RegistrationRefused as exc:
        why = str(exc).removeprefix("budget.cost_usd: ")
        raise InvalidInput(f"--cost-usd {value!r}: {why}") from None


def register(group: click.Group) -> None:
    group.add_command(runs)
