"""PostgreSQL: the tick's report of blocked runs (``store.blocked``) is prepared, and every plan of it,
generic or made for its parameters, reads ``runs`` only through the partial indexes of open runs
(``ix_runs_active_since``, ``ix_runs_poll``), never the ledger: over a burst of open runs that the
statistics predate, and over the same ledger analyzed (:mod:`alma_schedule.stores.postgres.hot`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from alma_schedule.stores.postgres import hot
from alma_schedule.stores.sql import queries as q
from alma_schedule.testing.builders import SECOND, T0, TIMERS
from tests.stores.sql_load import burst_ledger
from tests.stores.sql_support import explain_plan, libpq_url, opened

pytestmark = pytest.mark.postgres

ROUTINES = 5_000
OPEN_INDEXES = {"ix_runs_active_since", "ix_runs_poll"}


@pytest.fixture(scope="module")
def burst_url() -> Iterator[str]:
    with burst_ledger(ROUTINES, T0) as url:
        yield url


def _index_scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every scan node but a bitmap heap scan (which reads the rows its index scans found)."""
    if "Scan" in plan["Node Type"] and plan["Node Type"] != "Bitmap Heap Scan":
        yield plan
    for child in plan.get("Plans", ()):
        yield from _index_scans(child)


def test_every_plan_reads_only_the_open_runs(burst_url: str) -> None:
    conninfo = libpq_url(burst_url)
    rendered = hot.rendered(q.probe.blocked_statement(100), "alma")
    assert "LIMIT 100" in rendered.sql  # a literal: the generic plan knows it
    args = rendered.args(q.probe.tick_probe_params(T0, T0 - timedelta(hours=1)))
    for analyzed in (False, True):
        if analyzed:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute("ANALYZE")
        for mode in ("force_generic_plan", "force_custom_plan"):
            plan = explain_plan(conninfo, rendered.sql, args, mode=mode)
            indexes = {n.get("Index Name") for n in _index_scans(plan)}
            assert indexes and indexes <= OPEN_INDEXES, f"analyzed={analyzed} {mode}: {json.dumps(plan)}"


def test_the_blocked_read_is_prepared(burst_url: str) -> None:
    with opened(burst_url, pool_size=1, max_overflow=0) as store:
        for i in range(8):
            assert len(store.blocked(T0 + timedelta(days=1) + i * SECOND, TIMERS.run_time_limit, limit=50)) == 50
        with store.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT generic_plans + custom_plans FROM pg_prepared_statements"
                " WHERE strpos(statement, 'blocked_at IS NOT NULL') > 0"
            ).all()
            conn.commit()  # never a ROLLBACK: psycopg deallocates its prepared statements on one
    assert [tuple(r) for r in rows] == [(8,)]
