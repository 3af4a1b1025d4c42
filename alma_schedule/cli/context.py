"""What every CLI command shares: the fleet's app, the settings (read once), the store, output helpers.

docs/architecture.md, section "The modules, in detail" (cli/context.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from typing import Any, TypeVar

import click

from alma_schedule.cli.project import (
    AppSource,
    Project,
    announce,
    find_project,
    locate_app,
    put_on_path,
    require_store,
    store_origin,
)
from alma_schedule.cli.terminal import terminal_cell, terminal_text
from alma_schedule.errors import AlmaScheduleError
from alma_schedule.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliContext:
    """The object behind ``click.pass_obj``: flags collected by the group, settings built once."""

    overrides: dict[str, Any] = field(default_factory=dict)
    debug: bool = False
    app_path: str | None = None
    _settings: Settings | None = None
    _store: Any = None
    _app: Any = None
    _app_source: AppSource | None = None
    _project: Project | None = None

    def project(self) -> Project:
        """The ``[tool.alma-schedule]`` table above the working directory (read once)."""
        if self._project is None:
            self._project = find_project()
        return self._project

    def app(self) -> Any:
        """The fleet's Celery app, found from ``-A``, ``ALMA_CELERY_APP``, else ``app`` under
        ``[tool.alma-schedule]`` (imported once, named on a terminal); None when none names one."""
        if self._app is None:
            source = locate_app(self.app_path, self.project())
            if source is None:
                return None
            from alma_schedule.runners.task import load_celery_app

            put_on_path(source)
            setting = "-A/--app" if source.origin == "-A" else source.origin
            self._app = load_celery_app(source.path, setting=setting)
            self._app_source = source
            announce(source, str(self._app.main))
        return self._app

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            app = self.app()
            overrides = dict(self.overrides)
            if self._app_source is not None and self._app_source.origin != "ALMA_CELERY_APP":
                overrides["celery_app"] = self._app_source.path  # the task kind sends through the same app
            self._settings = load_settings(overrides, conf=self._conf(app))
        return self._settings

    def _conf(self, app: Any) -> dict[str, Any] | None:
        """The app's ``alma_*`` keys over ``[tool.alma-schedule]`` database_url (the lowest layer)."""
        conf: dict[str, Any] = {}
        if self.project().database_url:
            conf["alma_database_url"] = self.project().database_url
        if app is not None:
            conf.update((str(k), app.conf[k]) for k in list(app.conf.keys()) if str(k).lower().startswith("alma_"))
        return conf or None

    def store_url(self) -> str:
        """The configured store's URL; :class:`StoreNotConfigured` when nothing configures one
        (never the embedded default: a command would create a file in the working directory)."""
        url = self.settings.database_url  # a malformed or unknown setting is named first
        conf = None if self._app is None else self._app.conf
        require_store(store_origin(self.overrides.get("database_url"), self.project(), conf))
        return url

    def sender_app(self) -> Any:
        """The fleet's app when it called ``install(app)`` (sends go through it), else None."""
        app = self.app()
        if app is None:
            return None
        from alma_schedule.tasks.composition import composition_of

        return app if composition_of(app) is not None else None

    def use_settings(self, settings: Settings) -> None:
        self._settings = settings

    def store(self) -> Any:
        """The store named by ``database_url`` (opened once per command)."""
        if self._store is None:
            from alma_schedule.stores import open_store

            self._store = open_store(self.store_url(), schema=self.settings.database_schema)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def fail(message: str) -> None:
    """Print one line on stderr and exit 1 (control and bidi characters shown as ``\\uXXXX``)."""
    click.echo(f"error: {terminal_text(message)}", err=True)
    raise SystemExit(1)


def handle_errors(fn: F) -> F:
    """Turn every error into a one-line message and exit 1 (a traceback only with --debug)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        obj = ctx.find_object(CliContext)
        try:
            return fn(*args, **kwargs)
        except AlmaScheduleError as exc:
            if obj is not None and obj.debug:
                raise
            fail(str(exc))
        except (click.ClickException, click.Abort, click.exceptions.Exit):
            raise  # click's own: usage errors (exit 2) print themselves
        except Exception as exc:  # a bug or a library's error: still one line
            if obj is not None and obj.debug:
                raise
            first = next(iter(str(exc).strip().splitlines()), "")[:300]
            fail(f"unexpected {type(exc).__name__}{': ' + first if first else ''} (--debug shows the traceback)")
        finally:
            if obj is not None and ctx.parent is not None and ctx.parent.parent is None:
                pass

    return wrapper  # type: ignore[return-value]


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=False, default=_default))


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A rich table on stdout (plain text when not a terminal). Every title, header and cell goes
    through :func:`~alma_schedule.cli.terminal.terminal_cell`: stored text is shown as text, never
    read as rich markup or emoji codes, its control and bidi characters as ``\\uXXXX``."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=None if title is None else terminal_cell(title), show_lines=False)
    for c in columns:
        table.add_column(terminal_cell(c), overflow="fold")
    for row in rows:
        table.add_row(*(terminal_cell(v) for v in row))
    console = Console(
        file=sys.stdout, width=200 if not sys.stdout.isatty() else None, markup=False, emoji=False, highlight=False
    )
    console.print(table)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(fn)
