"""The tick log of :class:`~alma_schedule.stores.sql.SqlStore` (issue 17): the tick's upsert of its
minute with the prune of old minutes in ONE statement on PostgreSQL (ONE transaction on SQLite),
and the overview's read; and the end of a tick, ``record_tick``: the heartbeat (with the wake-up
hint) and the tick's minute, ONE statement on PostgreSQL (built once, :func:`.queries.ticklog.record_tick`).

``begin_tick_end`` (PostgreSQL): the end of a tick started BEFORE the tick's last sends, so that the
server runs it while the worker builds and publishes its messages (at 1,000 routines the end of a
tick, its heartbeat and its report of blocked runs, took about a fifth of the tick; the sends about
as long). In psycopg's pipeline mode on one pooled connection, in this order: the erroring read and
the blocked read (when asked), then ``record_tick``'s statement, each sent at once, with no round
trip; calling the context's value ends the pipeline (its Sync: ONE round trip), which commits the
pipeline's implicit transaction, and reads the answers. Until then ``record_tick``'s write holds its
two rows (the heartbeat's and the minute's): a concurrent tick's end waits for these sends. The
reads come first, so no failure after ``record_tick`` can roll it back; a read that failed, or that
a failure before it aborted, is returned None and the tick asks for it with its own read. Once
``record_tick``'s statement is sent, the tick never sends it again: when the pipeline fails its
outcome is unknown (the commit may have happened before its answer was lost), so the failure is
reported as a failed ``record_tick`` is (``heartbeat_failed``), not repeated (the tick log's minute
would count the tick twice).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import Any

from alma_schedule.model import TickEndAsk, TickEndParts, TickMinute
from alma_schedule.stores.backfill_args import log_tick_args, tick_end_args
from alma_schedule.stores.sql import ahead, hot
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.queries import probe, ticklog
from alma_schedule.stores.sql.rows import as_utc, erroring_from_rows, run_from_row
from alma_schedule.stores.sql.store_base import SqlBase
from alma_schedule.stores.validation import check_limit

log = logging.getLogger("alma_schedule.stores")


class TickLogMixin(SqlBase):
    def log_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> None:
        now, claimed, lag_p50, lag_p95 = log_tick_args(now, claimed, lag_p50, lag_p95)
        # PostgreSQL: ONE statement (autocommit); SQLite: its two statements in one transaction
        with self._tx(single=True) as conn:
            for stmt in q.log_tick_minute(self.dialect, now, claimed, lag_p50, lag_p95):
                conn.execute(stmt)

    def record_tick(self, now: datetime, claimed: int, lag_p50: float | None, lag_p95: float | None) -> datetime | None:
        now, claimed, lag_p50, lag_p95 = log_tick_args(now, claimed, lag_p50, lag_p95)
        params = ticklog.record_tick_params(now, claimed, lag_p50, lag_p95)
        # PostgreSQL: ONE prepared statement (autocommit, .hot); SQLite: its three in one transaction
        with self._tx(single=self.dialect == "postgresql") as conn:
            first, *rest = ticklog.record_tick(self.dialect)
            if self.dialect == "postgresql":
                row = hot.one_row(conn, first, self.schema, params)
                at: datetime | None = as_utc(row[0]) if row is not None else None
                return at
            hint: datetime | None = conn.execute(first, params).scalar()
            for stmt in rest:
                conn.execute(stmt, params)
            return hint

    @contextmanager
    def begin_tick_end(self, ask: TickEndAsk) -> Iterator[Callable[[], TickEndParts]]:
        """See the module docstring (SQLite: nothing starts early, every part None)."""
        now, claimed, lag_p50, lag_p95, limit, cutoff = tick_end_args(ask)  # refused before anything starts
        if self.dialect != "postgresql":
            yield TickEndParts
            return
        with ExitStack() as stack:
            sent: dict[str, hot.Sent] = {}
            sending = False  # record_tick's statement handed to the driver (it may have left)
            try:
                conn = stack.enter_context(self._tx(single=True))
                driver: Any = conn.connection.driver_connection
                stack.callback(ahead.out_of_pipeline, conn, driver)  # after the pipeline's own end
                stack.enter_context(driver.pipeline())
                schema = self.schema
                if limit is not None:  # rendered with its literal LIMIT, planned per execution as before
                    stmt = probe.erroring_statement(max(limit, 1))
                    sent["erroring"] = hot.sent_rows(conn, stmt, schema, {}, prepare=False)
                if cutoff is not None:
                    params = probe.tick_probe_params(now, cutoff)
                    sent["blocked"] = hot.sent_rows(conn, probe.blocked_statement(100), schema, params, prepare=True)
                first = ticklog.record_tick(self.dialect)[0]
                params = ticklog.record_tick_params(now, claimed, lag_p50, lag_p95)
                sending = True
                sent["heartbeat"] = hot.sent_rows(conn, first, self.schema, params, prepare=True)
            except Exception as exc:  # nothing obtained early: the tick asks for the parts itself ...
                failed = type(exc).__name__
                log.warning("the end of the tick could not start early: %s", failed, exc_info=exc)
                try:
                    stack.close()
                except Exception as gone:  # the pipeline's end on a connection that failed: dropped
                    log.debug("ending the failed pipeline: %s", type(gone).__name__)
                # ... but record_tick's, if its statement may have left: its outcome is unknown
                unknown = TickEndParts(heartbeat_failed=failed) if sending else TickEndParts()
                yield lambda: unknown
                return
            yield lambda: _parts(stack, sent, limit)

    def count_routines(self, cap: int = 10_000) -> dict[str, int]:
        cap = check_limit("cap", cap)
        with self._tx(read=True) as conn:
            row = conn.execute(q.count_routines(cap)).one()
        return {"enabled": int(row.enabled), "paused": int(row.paused), "disabled": int(row.disabled)}

    def tick_log(self, limit: int = 60) -> list[TickMinute]:
        limit = check_limit("limit", limit)
        with self._tx(read=True) as conn:
            rows = conn.execute(q.select_tick_log(limit)).all()
        return [TickMinute(r.minute, r.ticks, r.claimed, r.lag_p50, r.lag_p95) for r in rows]


def _parts(stack: ExitStack, sent: dict[str, hot.Sent], limit: int | None) -> TickEndParts:
    """End the pipeline (its Sync: the commit of ``record_tick``'s write) and return the connection,
    then read each part's answer; a read that failed is None. ``record_tick``'s answer only when the
    pipeline committed; when it was sent and the pipeline failed, ``heartbeat_failed`` (its outcome
    is unknown: never repeated)."""
    failed: str | None = None
    try:
        stack.close()
    except Exception as exc:
        failed = type(exc).__name__
        log.warning("the end of the tick, started early, failed: %s", failed, exc_info=exc)

    errors: dict[str, str] = {}

    def read(name: str) -> list[tuple[Any, ...]] | None:
        one = sent.get(name)
        if one is None:
            return None
        try:
            return one.rows()
        except Exception as exc:
            errors[name] = type(exc).__name__
            return None

    erroring, blocked, heartbeat = read("erroring"), read("blocked"), read("heartbeat")
    hint: tuple[datetime | None] | None = None
    if heartbeat is not None and failed is None:
        hint = (as_utc(heartbeat[0][0]) if heartbeat else None,)
    unknown = "heartbeat" in sent and hint is None  # sent, and no committed answer
    return TickEndParts(
        heartbeat=hint,
        erroring=erroring_from_rows(erroring, limit) if erroring is not None and limit is not None else None,
        blocked=tuple(run_from_row(r) for r in blocked) if blocked is not None else None,
        heartbeat_failed=(failed or errors.get("heartbeat") or "Error") if unknown else None,
    )
