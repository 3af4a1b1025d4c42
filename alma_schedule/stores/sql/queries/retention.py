"""SQL statements of the store, the retention of run history (``prune_runs``): one bounded batch of
the oldest terminal runs, deleted by key, their fires returned for ``pruned_through``.
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/retention.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement

from alma_schedule.stores.sql.queries.common import TERMINAL, in_states
from alma_schedule.stores.sql.queries.tick import _pk_in
from alma_schedule.stores.sql.schema import runs

__all__ = ["prunable_run", "prune_runs_batch"]


def prunable_run(before: datetime) -> ColumnElement[bool]:
    """A run ``prune_runs`` may delete: terminal, ended before ``before``. ``finished_at < before``
    implies the partial index ``ix_runs_finished``'s predicate (``finished_at IS NOT NULL``), so the
    oldest ones are read from that index in its order (no new index: revision 0010_history)."""
    return sa.and_(runs.c.finished_at < before, in_states(*TERMINAL))


def oldest_prunable(before: datetime, limit: int) -> sa.Select[Any]:
    """The keys of at most ``limit`` prunable runs, the oldest end first, locked (skipping rows
    another transaction holds: a concurrent prune takes the next ones)."""
    return (
        sa.select(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
        .where(prunable_run(before))
        .order_by(runs.c.finished_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )


def prune_runs_batch(before: datetime, limit: int, dialect: str) -> Any:
    """Delete :func:`oldest_prunable` (re-checked in the DELETE: never a row that is not terminal),
    returning each deleted row's routine key, origin and fire instant (aggregated by the caller)."""
    gone = sa.delete(runs).where(_pk_in(dialect, oldest_prunable(before, limit)), prunable_run(before))
    return gone.returning(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.origin, runs.c.fire_at)
