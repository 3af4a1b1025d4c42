"""``max_runs``: limited actions, counted when they start.

docs/architecture.md, section "The modules, in detail" (policies/limits.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["CLAIM_STEP", "COUNTED_ORIGIN", "START_STEP", "count_claim", "count_start", "limit_of", "starts_left"]

CLAIM_STEP = 1
START_STEP = 1
#: The origin whose starts ``max_runs`` counts (manual and backfill runs never do).
COUNTED_ORIGIN = "schedule"


def count_claim(claims: int) -> int:
    """``schedule_claims`` after one more claimed schedule fire (information only)."""
    return claims + CLAIM_STEP


def limit_of(schedule: Mapping[str, Any]) -> int | None:
    """The ``max_runs`` a stored schedule carries, read as the SQL statement reads the JSON: a JSON
    number, else no limit (registration stores only whole numbers; a fractional one would compare
    as its ceiling, since ``starts < x`` is ``starts < ceil(x)`` for a whole ``starts``)."""
    value = schedule.get("max_runs")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        return math.ceil(value) if math.isfinite(value) else None
    return value


def starts_left(starts: int, limit: int | None) -> int | None:
    """How many schedule fires may still start (None: no limit); the claim side claims while > 0."""
    return None if limit is None else max(limit - starts, 0)


def count_start(starts: int, limit: int | None, origin: str) -> tuple[int, bool] | None:
    """A start of a run of ``origin`` against the routine's count: ``(count after it, whether it
    finishes the routine)``, or None when it would pass the limit (the run ends ``skipped(finished)``,
    nothing counted). Runs of other origins and unlimited routines: ``(starts, False)``, uncounted."""
    if origin != COUNTED_ORIGIN or limit is None:
        return starts, False
    if starts >= limit:
        return None
    counted = starts + START_STEP
    return counted, counted >= limit
