"""Where the CLI finds the fleet: its Celery app (``-A``, ``ALMA_CELERY_APP``, else ``app`` under
``[tool.alma-schedule]`` of the nearest ``pyproject.toml`` holding that table, as ruff finds its own)
and whether a store is configured at all (the CLI never falls back to a file of its own).

docs/architecture.md, section "The modules, in detail" (cli/project.py).
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alma_schedule.errors import ConfigurationError, StoreNotConfigured
from alma_schedule.setting_values import env_name

#: The table of ``pyproject.toml`` we read, and the keys it may hold.
TABLE = "tool.alma-schedule"
KEYS = ("app", "database_url")

#: The one line of a command that needs a store where none is configured.
NO_STORE = (
    "no store is configured: name the fleet's app with -A (its alma_database_url), set ALMA_DATABASE_URL, "
    "pass --database-url, or set database_url (or app) under [tool.alma-schedule] in pyproject.toml; "
    "for a local file give an explicit URL (--database-url sqlite:///alma-schedule.sqlite3); nothing was created"
)


@dataclass(frozen=True, slots=True)
class Project:
    """The ``[tool.alma-schedule]`` table found (``path`` None: none above the working directory)."""

    path: Path | None = None
    app: str | None = None
    database_url: str | None = None


@dataclass(frozen=True, slots=True)
class AppSource:
    """The fleet's app path and where it was found (``-A``, ``ALMA_CELERY_APP``, or a pyproject.toml)."""

    path: str
    origin: str
    folder: Path | None = None


def find_project(start: Path | None = None) -> Project:
    """The ``[tool.alma-schedule]`` table of the nearest ``pyproject.toml`` at or above ``start``
    (default: the working directory) that holds one. A file that is not TOML, an unknown key or a
    value that is not text is refused in one line naming the file."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigurationError(f"{candidate}: cannot be read as TOML ({exc})") from None
        table = data.get("tool", {}).get("alma-schedule")
        if table is None:
            continue
        return _project(candidate, table)
    return Project()


def _project(path: Path, table: Any) -> Project:
    if not isinstance(table, dict):
        raise ConfigurationError(f"[{TABLE}] in {path} must be a table")
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigurationError(f"[{TABLE}] in {path}: unknown key {key!r} (known: {', '.join(KEYS)})")
        if not isinstance(value, str) or not value.strip():
            raise ConfigurationError(f"[{TABLE}] {key} in {path} must be a non-empty string")
    return Project(path=path, app=table.get("app"), database_url=table.get("database_url"))


def locate_app(app_path: str | None, project: Project, environ: Mapping[str, str] | None = None) -> AppSource | None:
    """The fleet's app, in order: ``-A``, ``ALMA_CELERY_APP``, ``app`` of ``[tool.alma-schedule]``."""
    env = os.environ if environ is None else environ
    if app_path:
        return AppSource(app_path, "-A")
    if env.get(env_name("celery_app")):
        return AppSource(env[env_name("celery_app")], "ALMA_CELERY_APP")
    if project.app and project.path is not None:
        return AppSource(project.app, f"[{TABLE}] app in {project.path}", project.path.parent)
    return None


def put_on_path(source: AppSource) -> None:
    """Put the folder of the ``pyproject.toml`` that named the app first on ``sys.path`` (as
    ``celery -A`` does for the working directory)."""
    if source.folder is not None and str(source.folder) not in sys.path:
        sys.path.insert(0, str(source.folder))


def store_origin(
    flag: str | None, project: Project, conf: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
) -> str | None:
    """Where the store's URL comes from (``--database-url``, ``ALMA_DATABASE_URL``, the app's
    ``alma_database_url``, a pyproject.toml), or None when nothing configures one."""
    env = os.environ if environ is None else environ
    if flag:
        return "--database-url"
    if env_name("database_url") in env:
        return env_name("database_url")
    if conf is not None and any(str(k).lower() == "alma_database_url" for k in list(conf.keys())):
        return "alma_database_url"
    if project.database_url:
        return f"[{TABLE}] database_url in {project.path}"
    return None


def require_store(origin: str | None) -> None:
    """Refuse, in one line naming every way to configure one, when no store is configured."""
    if origin is None:
        raise StoreNotConfigured(NO_STORE)


def announce(source: AppSource, main: str) -> None:
    """Name the app found on stderr, once, when stderr is a terminal (never in pipes or logs)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"alma-schedule: the Celery app {main!r} ({source.path}, from {source.origin})\n")
