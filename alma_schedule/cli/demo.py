"""``alma-schedule demo``: the embedded demo (no servers), and :func:`run_demo`, its three parts in order.

docs/architecture.md, section "The modules, in detail" (cli/demo.py).
"""

from __future__ import annotations

import logging
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from alma_schedule.cli.context import handle_errors


@click.command("demo")
@click.option("--hours", default=24, show_default=True, type=click.IntRange(1, 24 * 14), help="Simulated hours.")
@click.option(
    "--step", "step_minutes", default=5, show_default=True, type=click.IntRange(1, 60), help="Minutes per tick."
)
@click.option("--no-celery", is_flag=True, help="Skip the parts that need Celery (1: import-beat, 3: real ticks).")
@handle_errors
def demo(hours: int, step_minutes: int, no_celery: bool) -> None:
    """Run the whole flow on one machine: a fleet's beat_schedule imported and run, the governed kinds,
    then real Celery ticks (SQLite in a temporary folder, simulated time, in-memory broker).

    \b
    Example:
      alma-schedule demo --hours 24 --step 5
    """
    run_demo(hours=hours, step_minutes=step_minutes, celery=not no_celery, echo=click.echo)


#: The demo's first lines: what it will show, before anything runs.
OPENING = """alma-schedule demo: the whole flow on this machine, with no servers (SQLite, an in-memory broker).
It will show, in three parts:
  1. a small fleet's beat_schedule imported (import-beat), its task routines run by a real Celery worker
     over a simulated day: each claimed fire runs once, and one entry is refused with its reason;
  2. the governed kinds `turn` and `job` across London's spring-forward change, and a broken routine
     that stops nothing;
  3. real Celery ticks at real time.
"""


def run_demo(*, hours: int = 24, step_minutes: int = 5, celery: bool = True, echo: Any = print) -> dict[str, Any]:
    """The three parts in order; returns their counts (for tests)."""
    from alma_schedule.cli.demo_job import celery_ticks, simulate

    if celery:
        from alma_schedule.cli.demo_beat import require_celery

        require_celery()
    # The broken routine's planning error is shown from the tick report; keep its log traceback quiet.
    logging.getLogger("alma_schedule").addHandler(logging.NullHandler())
    logging.getLogger("alma_schedule").propagate = False
    step = timedelta(minutes=step_minutes)
    out: dict[str, Any] = {}
    echo(OPENING)
    with tempfile.TemporaryDirectory(prefix="alma-demo-") as tmp:
        folder = Path(tmp)
        echo("== part 1: your beat_schedule, imported: task routines on a real Celery worker (simulated time) ==")
        if celery:
            from alma_schedule.cli.demo_beat import operator_part

            (folder / "ops").mkdir()
            out["operator"] = operator_part(folder / "ops", hours=hours, step=step, echo=echo)
        else:
            echo("skipped (--no-celery): the fleet's tasks run on a real Celery worker, which needs the celery extra")
        echo("\n== part 2: the governed kinds `turn` and `job`, the engine in-process (simulated time) ==")
        out.update(simulate(folder, hours=hours, step=step, echo=echo))
        echo("\n== part 3: real Celery ticks (in-memory broker, in-process worker, real time) ==")
        if celery:
            out["celery"] = celery_ticks(folder, echo=echo)
        else:
            echo("skipped (--no-celery): real Celery ticks need the celery extra")
    echo(
        "\nThe demo's stores and the sink's file were in a temporary folder, now removed. To look around\n"
        'afterwards, run the same against a store of your own: docs/adopt.md, "Adopt it in your fleet".'
    )
    return out


def register(group: click.Group) -> None:
    group.add_command(demo)
