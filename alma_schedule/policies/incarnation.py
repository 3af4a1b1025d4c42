"""A routine's new incarnation (registered again after a delete, or new): what starts from zero.

docs/architecture.md, section "The modules, in detail" (stores/sql/store_routines.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from alma_schedule.policies import backoff

__all__ = ["fresh"]


def fresh(now: datetime) -> dict[str, Any]:
    """The fields a new incarnation sets: not deleted, no back-off, no claims, starts or collapsed fires
    counted (``max_runs`` and ``fires_missed`` count from zero), created and updated at ``now``."""
    return {
        "deleted_at": None,
        **backoff.CLEAR.fields(),
        "schedule_claims": 0,
        "schedule_starts": 0,
        "fires_missed": 0,
        "fires_missed_capped": False,
        "created_at": now,
        "updated_at": now,
    }
