"""The end of a tick started BEFORE the tick's last sends (:meth:`PostgresDriver.begin_tick_end`).
docs/architecture.md, section "The modules, in detail" (stores/postgres/tick_end.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import Any

from alma_schedule.model import TickEndAsk, TickEndParts
from alma_schedule.stores.backfill_args import tick_end_args
from alma_schedule.stores.postgres import ahead, hot, queries
from alma_schedule.stores.sql.driver import Transaction
from alma_schedule.stores.sql.queries import probe, ticklog
from alma_schedule.stores.sql.rows import as_utc, erroring_from_rows, run_from_row

log = logging.getLogger("alma_schedule.stores")

__all__ = ["begin"]


@contextmanager
def begin(tx: Transaction, schema: str, ask: TickEndAsk) -> Iterator[Callable[[], TickEndParts]]:
    """``begin_tick_end(ask)`` on PostgreSQL, in a transaction of ``tx`` (see the module docstring)."""
    now, claimed, lag_p50, lag_p95, limit, cutoff = tick_end_args(ask)  # refused before anything starts
    with ExitStack() as stack:
        sent: dict[str, hot.Sent] = {}
        sending = False  # record_tick's statement handed to the driver (it may have left)
        try:
            conn = stack.enter_context(tx(single=True))
            driver: Any = conn.connection.driver_connection
            stack.callback(ahead.out_of_pipeline, conn, driver)  # after the pipeline's own end
            stack.enter_context(driver.pipeline())
            if limit is not None:  # rendered with its literal LIMIT, planned per execution as before
                stmt = probe.erroring_statement(max(limit, 1))
                sent["erroring"] = hot.sent_rows(conn, stmt, schema, {}, prepare=False)
            if cutoff is not None:
                params = probe.tick_probe_params(now, cutoff)
                sent["blocked"] = hot.sent_rows(conn, probe.blocked_statement(100), schema, params, prepare=True)
            first = queries.record_tick()[0]
            params = ticklog.record_tick_params(now, claimed, lag_p50, lag_p95)
            sending = True
            sent["heartbeat"] = hot.sent_rows(conn, first, schema, params, prepare=True)
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
