"""The routine page's history: its audit trail (``routine_events``), newest first, every cell escaped.
docs/architecture.md, section "The modules, in detail" (dashboard/views_history.py).
"""

from __future__ import annotations

import json

from alma_schedule.dashboard.html import esc, instant, table
from alma_schedule.model import Scope
from alma_schedule.model.events import RoutineEvent
from alma_schedule.stores.base import Store

__all__ = ["HISTORY_ROWS", "history_section"]

#: The events the routine page shows (the CLI's ``routines history`` shows more).
HISTORY_ROWS = 20


def _diff(event: RoutineEvent) -> str:
    if event.diff is None:
        return "<em>erased</em>"
    if not event.diff:
        return ""
    return f"<code>{esc(json.dumps(event.diff, sort_keys=True, ensure_ascii=False))}</code>"


def history_section(store: Store, scope: Scope, routine_id: str) -> str:
    """The "History" section: when, who, what, why and the diff of the routine's latest events."""
    events = store.routine_events(scope, routine_id, limit=HISTORY_ROWS)
    rows = [[instant(e.at), esc(e.actor or "-"), esc(e.action), esc(e.reason or ""), _diff(e)] for e in events]
    headers = ["at (UTC)", "actor", "action", "reason", "diff"]
    return "<h2>History</h2>" + table(headers, rows, empty="no change recorded")
