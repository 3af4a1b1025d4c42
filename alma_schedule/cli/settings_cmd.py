"""``alma-schedule settings``: every setting, its ``ALMA_*`` variable, its ``alma_*`` app key, its default.

It reads :data:`alma_schedule.settings.FIELDS` (the one list of settings) and never loads the
settings themselves, so it works in the very environment it helps to fix: the message of an unknown
or malformed ``ALMA_*`` variable points here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import click

from alma_schedule.cli.context import emit_json, handle_errors, json_option, print_table
from alma_schedule.settings import FIELDS, conf_name, env_name


def default_text(value: Any) -> str:
    """A default as an operator would write it: ``60s``, ``(none)``, ``true``, the text itself."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    return str(value)


def documented_settings() -> list[dict[str, str]]:
    """Every setting an ``ALMA_*`` variable can set (code-only fields such as ``time_source`` excluded)."""
    return [
        {
            "setting": name,
            "env": env_name(name),
            "app_key": conf_name(name),
            "default": f.metadata.get("default_text") or default_text(f.default),
            "kind": f.metadata.get("kind") or "text",
            "doc": f.metadata["doc"],
        }
        for name, f in FIELDS.items()
        if f.metadata.get("kind") != "code"
    ]


@click.command("settings")
@json_option
@handle_errors
def settings(as_json: bool) -> None:
    """List every setting: its ALMA_* variable, its alma_* key in the fleet app's configuration
    (app.conf, read with -A or by install(app)), its default, kind and what it does.

    Precedence: the app's alma_* keys, then ALMA_* variables, then flags. Durations take 90, 90s, 15m, 2h, 1d or
    1h30m; booleans true/false. Reads no setting itself, so it runs even when one is wrong.

    \b
    Example:
      alma-schedule settings --json
    """
    rows = documented_settings()
    if as_json:
        emit_json(rows)
        return
    print_table(
        "ALMA_* settings",
        ["env var", "app key", "default", "kind", "what"],
        [(r["env"], r["app_key"], r["default"], r["kind"], r["doc"]) for r in rows],
    )


def register(group: click.Group) -> None:
    group.add_command(settings)
