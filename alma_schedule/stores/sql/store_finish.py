"""The finish's PostgreSQL shortcut and the streak step of :class:`~alma_schedule.stores.sql.SqlStore`.
docs/architecture.md, section "The modules, in detail" (stores/sql/store_finish.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from alma_schedule.model import ClaimResult, RunKey, RunResult
from alma_schedule.policies import audit, streak
from alma_schedule.settings import Timers
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import run_from_row
from alma_schedule.stores.sql.store_base import SqlBase
from alma_schedule.stores.sql.store_events import append


def finish_at_once(
    store: SqlBase,
    key: RunKey,
    result: RunResult,
    now: datetime,
    timers: Timers,
    allowed: Collection[str],
    cost: int | None,
    error_class: str | None,
) -> ClaimResult | None:
    """PostgreSQL: the whole finish as ONE statement (:mod:`.queries.finish`, autocommit: one
    round trip, prepared on the driver connection: :mod:`..postgres.hot`); None when it wrote nothing (a
    loser, a fire to release, a purged routine): then the transaction below decides."""
    if not allowed:  # no state the caller owns may end this way: a loser, which the transaction tells
        return None
    effect = streak.streak_effect(result.outcome, result.reason, counts_refused=timers.streak_counts_refused)
    stmt = q.finish_statement(tuple(sorted(allowed)), str(effect))
    params = q.run_params(
        key,
        now=now,
        f_state=result.outcome,
        f_reason=result.reason,
        f_cost=cost,
        f_error_class=error_class,
        f_erase_at=now + timers.result_retention,
        f_threshold=timers.failure_threshold,
        f_latch=streak.latch_reason(result.outcome, result.reason),
    )
    with store._tx(single=True) as conn:
        row = store._driver.one_row(conn, stmt, params)
    return None if row is None else ClaimResult(True, run_from_row(row), "won")


def streak_step(
    conn: Connection,
    rk: tuple[str, str, str],
    row: Mapping[str, Any],
    result: RunResult,
    now: datetime,
    timers: Timers,
) -> None:
    """Apply :func:`alma_schedule.policies.streak.step` to the locked routine row."""
    s = streak.step(
        row["consecutive_failures"],
        row["paused_reason"],
        result.outcome,
        result.reason,
        timers.failure_threshold,
        counts_refused=timers.streak_counts_refused,
    )
    if not s.changed:
        return
    values: dict[str, Any] = {"consecutive_failures": s.streak, "updated_at": now}
    if s.latch is not None:
        values["paused_reason"] = s.latch
        values["next_due_at"] = None
        append(conn, rk, audit.auto_paused(now, s.latch))  # the audit trail, in the finish's transaction
    conn.execute(q.update_routine(*rk, values))
