"""Provenance: where a routine came from (``Routine.source``) and from which entry (``source_entry``).

docs/architecture.md, section "The schedule stays in code" (provenance).
"""

from __future__ import annotations

from alma_schedule.errors import InvalidInput
from alma_schedule.model.ids import check_new_id

__all__ = [
    "API",
    "CLI",
    "DASHBOARD",
    "IMPORT_DCB",
    "IMPORT_REDBEAT",
    "REMOVED_FROM_BEAT",
    "beat_sync_source",
    "check_disabled_reason",
    "check_source",
    "import_beat_source",
    "shown_source",
]

API = "api"
CLI = "cli"
DASHBOARD = "dashboard"
IMPORT_DCB = "import-dcb"
IMPORT_REDBEAT = "import-redbeat"
#: The sources that name no entry.
PLAIN = (API, CLI, DASHBOARD)
#: The sources that name the entry they came from (``<prefix><app>`` or exactly the name).
BEAT_SYNC = "beat-sync:"
IMPORT_BEAT = "import-beat:"
#: ``disabled_reason`` of a synced routine whose entry left ``beat_schedule`` (only the sync lifts it).
REMOVED_FROM_BEAT = "removed from beat_schedule"
MAX_LENGTH = 200


def beat_sync_source(app: str) -> str:
    """The source of the routines the beat sync of the Celery app ``app`` (its main name) writes."""
    return f"{BEAT_SYNC}{app}"


def import_beat_source(app: str) -> str:
    """The source of the routines ``import-beat`` registers from the Celery app ``app``."""
    return f"{IMPORT_BEAT}{app}"


def _names_entry(source: str) -> bool:
    return source in (IMPORT_DCB, IMPORT_REDBEAT) or (
        source.startswith((BEAT_SYNC, IMPORT_BEAT)) and len(source) > len(source.split(":", 1)[0]) + 1
    )


def check_source(source: str | None, entry: str | None) -> None:
    """:class:`InvalidInput` unless ``source`` is None (with no entry), one of ``api``/``cli``/
    ``dashboard`` (no entry), or an entry source (``beat-sync:<app>``, ``import-beat:<app>``,
    ``import-dcb``, ``import-redbeat``) with a non-empty entry name; each at most 200 characters."""
    for name, value in (("source", source), ("source_entry", entry)):
        if value is not None and (not isinstance(value, str) or len(value) > MAX_LENGTH or "\x00" in value):
            raise InvalidInput(f"{name} must be text of at most {MAX_LENGTH} characters without NUL")
    if source is None or source in PLAIN:
        if entry is not None:
            raise InvalidInput(f"source_entry is only recorded with an entry source, not {source!r}")
        return
    if not _names_entry(source):
        raise InvalidInput(
            f"source {source!r} is not one of api, cli, dashboard, beat-sync:<app>, import-beat:<app>, "
            "import-dcb, import-redbeat"
        )
    if not entry:
        raise InvalidInput(f"source {source!r} needs the entry's name (source_entry)")


def shown_source(source: str | None, entry: str | None) -> str:
    """One short text for listings: ``beat-sync:proj (entry nightly)``; ``-`` when unrecorded."""
    if source is None:
        return "-"
    return source if entry is None else f"{source} (entry {entry})"


def check_disabled_reason(enabled: bool, reason: str | None) -> None:
    """``set_enabled``'s ``reason``: only with a disable, and a new text (no control character)."""
    if reason is None:
        return
    if enabled:
        raise InvalidInput("set_enabled: a reason is only given with a disable (enabled=False)")
    check_new_id("reason", reason)
