"""The ``alma-schedule`` command line: one click group; each area adds its commands from its module.

Every area module exposes ``register(group)``; :data:`AREAS` lists them. Global flags map to
settings (``--database-url`` -> ``ALMA_DATABASE_URL``, ...): flags win over the environment, which
wins over the ``alma_*`` keys of the fleet's app (``-A/--app MODULE[:APP]``, as ``celery -A``).
"""

from __future__ import annotations

import importlib
import sys

import click

from alma_schedule.cli.context import CliContext

#: Modules under alma_schedule.cli that add commands (each has ``register(group)``).
AREAS = (
    "schedule",
    "routines",
    "runs",
    "ticks",
    "celery_cmds",
    "beat_cmds",
    "import_cmds",
    "demo",
    "migrate",
    "settings_cmd",
    "dashboard_cmds",
    "calendars",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
# The version is the installed distribution's (pyproject.toml's [project] version), read when --version is asked.
@click.version_option(None, "--version", package_name="alma-schedule", prog_name="alma-schedule")
@click.option(
    "-A",
    "--app",
    "app_path",
    default=None,
    metavar="MODULE[:APP]",
    help="The fleet's Celery app, as `celery -A` (its alma_* keys are settings) [env ALMA_CELERY_APP].",
)
@click.option("--database-url", envvar=None, default=None, help="Store URL [env ALMA_DATABASE_URL].")
@click.option("--broker-url", envvar=None, default=None, help="Celery broker URL [env ALMA_BROKER_URL].")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def cli(
    ctx: click.Context, app_path: str | None, database_url: str | None, broker_url: str | None, debug: bool
) -> None:
    """alma-schedule: the clock of a Celery fleet, as a tick.

    Settings come from the fleet app's alma_* keys (-A), ALMA_* variables over them, and the
    flags over both; `alma-schedule settings` lists every one.

    \b
    Examples:
      alma-schedule schedule next '{"cron": "30 2 * * *", "tz": "America/New_York"}' -n 5
      alma-schedule -A fleet clock send      # through the fleet's app (it called install(app))
    """
    ctx.obj = CliContext(
        overrides={"database_url": database_url, "broker_url": broker_url},
        debug=debug,
        app_path=app_path,
    )
    ctx.call_on_close(ctx.obj.close)


for _area in AREAS:
    importlib.import_module(f"alma_schedule.cli.{_area}").register(cli)


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    try:
        cli.main(args=argv, prog_name="alma-schedule", standalone_mode=True)
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)
