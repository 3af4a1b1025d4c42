"""The run retention's batch (``Store.prune_runs``) reads the ledger through ``ix_runs_finished`` (no
new index: revision 0010_history's run retention block is empty), never by a scan of ``runs``: with
nothing to delete it is one index probe (the tick's hot path while the setting is on), and with a
backlog it reads ``limit`` rows in the index's order. 40,000 terminal rows and a few hundred open
ones are loaded and ANALYZEd; each statement is EXPLAINed as issued, under the generic and the
custom plan."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from alma_schedule.stores.sql import SqlStore
from tests.stores.sql_load import copy_routines, copy_runs, history_rows, open_rows
from tests.stores.sql_support import explain_plan, libpq_url, opened, pg_database, plan_nodes

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ROUTINES = 20_000


@pytest.fixture(scope="module")
def loaded() -> Iterator[tuple[str, SqlStore]]:
    with pg_database() as url, opened(url) as store:
        conninfo = libpq_url(url)
        copy_routines(conninfo, ROUTINES, 0, NOW)
        copy_runs(conninfo, history_rows(ROUTINES, NOW, per_routine=2))
        copy_runs(conninfo, open_rows(range(19_000, 19_300), "submitted", NOW, due=True))
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("ANALYZE")
        yield conninfo, store


@contextmanager
def _captured(store: SqlStore) -> Iterator[list[tuple[str, Any]]]:
    seen: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if not executemany and re.search(r"\bruns\b", statement) and statement.lstrip().startswith("DELETE"):
            seen.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", grab)
    try:
        yield seen
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", grab)


def _reads(conninfo: str, statement: str, params: Any) -> list[tuple[str, str | None]]:
    """Each plan's reads of ``runs``: (node type, index), under both plans; never a sequential scan."""
    out: list[tuple[str, str | None]] = []
    for mode in ("force_generic_plan", "force_custom_plan"):
        nodes = list(plan_nodes(explain_plan(conninfo, statement, params, mode=mode)))
        reads = [(n["Node Type"], n.get("Index Name")) for n in nodes if n.get("Relation Name") == "runs"]
        assert ("Seq Scan", None) not in reads, (mode, reads)
        out += reads
    return out


def test_an_idle_prune_is_one_probe_of_ix_runs_finished(loaded: tuple[str, SqlStore]) -> None:
    conninfo, store = loaded
    with _captured(store) as seen:
        assert store.prune_runs(NOW - timedelta(days=1), 1000) == 0  # every terminal row is younger
    [(statement, params)] = seen
    reads = _reads(conninfo, statement, params)
    assert ("Index Scan", "ix_runs_finished") in reads or ("Index Only Scan", "ix_runs_finished") in reads, reads
    # and the test can fail: without the index, the same statement scans the ledger
    nodes = list(plan_nodes(explain_plan(conninfo, statement, params, without=("ix_runs_finished",))))
    assert any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "runs" for n in nodes)


def test_a_backlog_is_read_in_the_index_order_limit_rows_at_a_time(loaded: tuple[str, SqlStore]) -> None:
    conninfo, store = loaded
    with _captured(store) as seen:
        assert store.prune_runs(NOW, 1000) == 1000  # 40,000 are due: one bounded batch goes
    [(statement, params)] = seen
    reads = _reads(conninfo, statement, params)
    assert any(index == "ix_runs_finished" for _, index in reads), reads
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT count(*) FROM runs WHERE state = 'submitted'").fetchone()
    assert row == (300,)  # the open runs are never touched
