"""The retention of run history of :class:`~alma_schedule.stores.sql.SqlStore`: ``prune_runs``.
docs/architecture.md, section "The modules, in detail" (stores/sql/store_retention.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from alma_schedule.policies.backfill import FIRE_ORIGINS
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.queries.retention import prune_runs_batch
from alma_schedule.stores.sql.store_base import SqlBase
from alma_schedule.stores.validation import check_limit, require_utc

__all__ = ["latest_fires", "prune_runs"]


def latest_fires(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """From the deleted rows ``(org, uid, routine_id, origin, fire_at)``: each routine's latest fire
    instant of its ``schedule``/``backfill`` rows, as the moves of :func:`.queries.raise_pruned_through`."""
    fires: dict[tuple[str, str, str], datetime] = {}
    for org, uid, routine_id, origin, fire in rows:
        key = (org, uid, routine_id)
        if origin in FIRE_ORIGINS and (key not in fires or fire > fires[key]):
            fires[key] = fire
    return [{"org": k[0], "uid": k[1], "routine_id": k[2], "fire": f} for k, f in sorted(fires.items())]


def prune_runs(store: SqlBase, before: datetime, limit: int) -> int:
    """``Store.prune_runs``: ONE transaction, two statements at most: the DELETE of at most ``limit``
    of the oldest terminal runs ended before ``before`` (selected through ``ix_runs_finished``,
    skip-locked, ``RETURNING`` their fires), then, when a fire row went, one batched UPDATE raising
    the routines' ``pruned_through`` (never lowering it). Returns the count."""
    before = require_utc("before", before)
    limit = check_limit("limit", limit)
    if limit == 0:
        return 0
    with store._tx() as conn:
        rows = conn.execute(prune_runs_batch(before, limit, store.dialect)).all()
        moves = latest_fires(rows)
        if moves:
            conn.execute(*q.raise_pruned_through(store.dialect, moves))
        return len(rows)
