"""``alma-schedule settings``: every setting, its ``ALMA_*`` variable, its app key and its default.

The list an unknown ``ALMA_*`` variable or ``alma_*`` app key points to. It reads no setting, so it
works while the configuration is broken.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import click

from alma_schedule.cli.context import emit_json, json_option, print_table
from alma_schedule.settings import FIELDS, conf_name, env_name


def _default(value: Any) -> Any:
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    return value


def rows() -> list[dict[str, Any]]:
    """One entry per setting a deployment can set (code-only fields left out)."""
    out = []
    for name, f in FIELDS.items():
        if f.metadata.get("kind") == "code":
            continue
        out.append(
            {
                "setting": name,
                "env": env_name(name),
                "app_key": conf_name(name),
                "default": _default(f.default),
                "what": f.metadata.get("doc", ""),
            }
        )
    return out


@click.command("settings")
@json_option
def settings_cmd(as_json: bool) -> None:
    """List every setting: its ALMA_* variable, its alma_* key in the fleet app's configuration
    (app.conf, read with -A or by install(app)), its default and what it does.

    Precedence: the app's alma_* keys, then ALMA_* variables, then flags.

    \b
    Example:
      alma-schedule settings --json
    """
    listed = rows()
    if as_json:
        emit_json(listed)
        return
    print_table(
        "settings (app key < ALMA_* variable < flag)",
        ["ALMA_* variable", "app.conf key", "default", "what"],
        [(r["env"], r["app_key"], "(none)" if r["default"] is None else r["default"], r["what"]) for r in listed],
    )


def register(group: click.Group) -> None:
    group.add_command(settings_cmd)
