"""``alma-schedule demo``: the embedded demo (no servers)."""

from __future__ import annotations

import click

from alma_schedule.cli.context import handle_errors


@click.command("demo")
@click.option("--hours", default=24, show_default=True, type=click.IntRange(1, 24 * 14), help="Simulated hours.")
@click.option(
    "--step", "step_minutes", default=5, show_default=True, type=click.IntRange(1, 60), help="Minutes per tick."
)
@click.option("--no-celery", is_flag=True, help="Skip the real Celery ticks (part 2).")
@handle_errors
def demo(hours: int, step_minutes: int, no_celery: bool) -> None:
    """Run the whole flow on one machine: SQLite in a temp folder, simulated time, then real Celery ticks.

    \b
    Example:
      alma-schedule demo --hours 24 --step 5
    """
    from alma_schedule.cli.demo_job import run_demo

    run_demo(hours=hours, step_minutes=step_minutes, celery=not no_celery, echo=click.echo)


def register(group: click.Group) -> None:
    group.add_command(demo)
