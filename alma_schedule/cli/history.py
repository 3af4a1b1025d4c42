"""``alma-schedule routines history``: a routine's audit trail; and ``--actor``, who the CLI's writes
name (the OS user and host, ``alice@host``, when not given).

docs/architecture.md, section "The modules, in detail" (cli/history.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.cli.terminal import terminal_text
from alma_schedule.cli.wiring import build_schedule
from alma_schedule.model import Scope
from alma_schedule.model.events import RoutineEvent
from alma_schedule.policies.audit import check_actor, local_actor

__all__ = ["actor_option", "cli_actor", "history"]

F = TypeVar("F", bound=Callable[..., Any])

ACTOR_HELP = "Who the audit trail names for this change (default: the OS user and host, user@host)."


def actor_option(fn: F) -> F:
    """The ``--actor`` option of every writing command."""
    return click.option("--actor", "actor", default=None, metavar="NAME", help=ACTOR_HELP)(fn)


def cli_actor(actor: str | None) -> str:
    """The actor a CLI write names: ``--actor`` (checked: at most 200 characters, no control
    character) or else ``user@host``."""
    checked = check_actor(actor)
    return checked if checked is not None else local_actor()


def _diff_text(event: RoutineEvent) -> str:
    if event.diff is None:
        return "(erased)"
    return json.dumps(event.diff, sort_keys=True, ensure_ascii=False) if event.diff else ""


@click.command("history")
@click.argument("scope")
@click.argument("routine_id")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000), help="Events to show.")
@json_option
@click.pass_obj
@handle_errors
def history(obj: CliContext, scope: str, routine_id: str, limit: int, as_json: bool) -> None:
    """A routine's audit trail, newest first: when, who (actor), what (action, reason) and the diff
    of its schedule, definition and levers (a deleted routine's too).

    \b
    Example:
      alma-schedule routines history acme/alice briefing
    """
    sc = Scope.parse(scope)
    events = build_schedule(obj).history(sc, routine_id, limit=limit)
    if as_json:
        emit_json([e.to_dict() for e in events])
        return
    if not events:
        click.echo(terminal_text(f"no events for {sc}/{routine_id}"))
        return
    rows = [(e.at.isoformat(), e.actor or "-", e.action, e.reason or "", _diff_text(e)) for e in events]
    print_table(f"history of {sc}/{routine_id}", ["at", "actor", "action", "reason", "diff"], rows)
