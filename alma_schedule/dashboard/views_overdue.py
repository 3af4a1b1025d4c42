"""The overview's "did not run" section: the overdue fires (``Store.overdue``) the user may see.
docs/architecture.md, section "The modules, in detail" (dashboard/views_overdue.py).
"""

from __future__ import annotations

from datetime import datetime

from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.html import esc, instant, link, routine_path, table
from alma_schedule.model import Scope
from alma_schedule.stores.base import Store

#: How many overdue fires the overview reads (the store's order: routine key).
LIMIT = 100


def overdue_section(store: Store, access: Access, now: datetime) -> str:
    """The overdue fires of the scopes ``access`` allows (every stored text escaped)."""
    fires = [f for f in store.overdue(now, LIMIT) if access.allows(Scope(f.org, f.uid))]
    rows = [
        [
            link(routine_path(f.org, f.uid, f.routine_id), f"{f.org}/{f.uid}/{f.routine_id}"),
            instant(f.fire_at),
            instant(f.overdue_since),
            esc(f.run_id or "(never claimed)"),
            esc(f.state or ""),
            esc(f.reason or ""),
            esc("delivered" if f.delivered_at is not None else ""),
        ]
        for f in fires
    ]
    headers = ["routine", "fire", "overdue since", "run", "state", "reason", "alert"]
    return "<h2>Overdue fires (expect: did not run)</h2>" + table(headers, rows, empty="none")
