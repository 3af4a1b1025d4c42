"""The generic-plan trap: a long-lived process never runs the supersede UPDATE on a generic plan.

psycopg prepares a statement from its 5th execution by default; PostgreSQL then switches a prepared
statement to its cached generic plan after 5 custom ones when it looks no dearer. The store's
connections prepare nothing (``prepare_threshold = None``; only the run side's two per-fire
statements are prepared, explicitly: :mod:`alma_schedule.stores.postgres.hot`), so every other statement
is sent unnamed and planned for its parameters at each execution. A generic plan assumes 10
rows for our ``unnest`` key arrays and trusts statistics taken before the tick claimed its runs, so
it becomes a nested loop over every claimed run times the keys (seconds per 1,000-key batch).

The data reproduces that: 5,000 finished runs ANALYZEd with no claimed run, then 3,000 claimed runs
the statistics do not know (autovacuum off on this test database, so they stay unknown, as they are
within one tick). The control shows PostgreSQL takes the generic plan here once psycopg's default
preparation is restored on the connection; with the store's setting the statement is never named.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from alma_schedule.stores.sql import SqlStore
from alma_schedule.stores.sql import queries as q
from tests.stores.sql_load import copy_runs, history_rows, open_rows, routine_id
from tests.stores.sql_support import explain_plan, libpq_url, opened, pg_database, plan_nodes

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CLAIMED = 3_000
KEYS = 10


@pytest.fixture(scope="module")
def stale() -> Iterator[SqlStore]:
    with pg_database() as url, opened(url) as store:
        conninfo = libpq_url(url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("ALTER TABLE runs SET (autovacuum_enabled = false)")
        copy_runs(conninfo, history_rows(5_000, NOW))
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("ANALYZE runs")
        copy_runs(conninfo, open_rows(range(CLAIMED), "claimed", NOW, due=True))
        yield store


def _supersede(conn: sa.Connection, batch: int) -> int:
    keys = [(f"org-{i % 100}", "user-1", routine_id(i), "new-fire") for i in range(batch * KEYS, (batch + 1) * KEYS)]
    stmt, params = q.supersede("postgresql", keys, NOW)
    with conn.begin():
        return len(conn.execute(stmt, params).fetchall())


def _plans(conn: sa.Connection) -> list[tuple[int, int]]:
    """(generic, custom) plan counts of this session's prepared supersede statement, if prepared."""
    rows = conn.exec_driver_sql(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        " WHERE statement LIKE '%%s_ending%%UPDATE %%runs SET state%%'"
    ).all()
    conn.commit()  # never a ROLLBACK: psycopg deallocates its prepared statements on one
    return [(int(r[0]), int(r[1])) for r in rows]


def test_the_supersede_statement_is_never_prepared_so_never_takes_a_generic_plan(stale: SqlStore) -> None:
    with stale.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "auto"
        conn.rollback()
        for batch in range(12):
            assert _supersede(conn, batch) == KEYS
        assert _plans(conn) == []  # sent unnamed every time: each execution planned for its keys
        # the control: psycopg's default preparation (from the 5th execution) takes the generic plan here
        conn.connection.driver_connection.prepare_threshold = 5  # type: ignore[union-attr]
        for batch in range(12, 24):
            assert _supersede(conn, batch) == KEYS
        assert _plans(conn)[0][0] > 0
        conn.invalidate()  # never hand the changed session back to the pool


def _reads_runs(node: dict[str, Any]) -> bool:
    """Whether ``node`` reads ``runs`` other than at given row addresses (a TID scan reads only
    the rows its probe found)."""
    return any(n.get("Relation Name") == "runs" and n["Node Type"] != "Tid Scan" for n in plan_nodes(node))


def _probed(node: dict[str, Any]) -> bool:
    """A scan of ``runs`` through an index on the routine's key, or at the ctids such a probe read."""
    return "routine_id" in node.get("Index Cond", "") or "ctid = ANY" in node.get("TID Cond", "")


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("statement", ["supersede", "replace_buffered", "lock_open_runs"])
def test_the_claims_open_run_statements_probe_each_routine_never_every_open_run(
    stale: SqlStore, statement: str, mode: str
) -> None:
    """The statements a claim batch runs over its fires' open runs, planned while the statistics
    know no open run (3,000 exist): each routine's run is reached through an index probe on its
    key, never by hashing (or merging) every open run of the table, which costs O(open runs) per
    batch (a big tick's claimed runs pile up batch after batch)."""
    keys = [(f"org-{i % 100}", "user-1", routine_id(i), "new-fire") for i in range(KEYS)]
    stmt, params = {
        "supersede": lambda: q.supersede("postgresql", keys, NOW),
        "replace_buffered": lambda: q.replace_buffered("postgresql", keys, NOW),
        "lock_open_runs": lambda: q.lock_open_runs([k[:3] for k in keys]),
    }[statement]()
    seen: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, text: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen.append((text, parameters))

    with stale.engine.connect() as conn:
        sa.event.listen(conn, "before_cursor_execute", grab)
        conn.execute(stmt, params)  # as issued (the schema translated), then rolled back
        conn.rollback()
    [(text, issued)] = seen
    plan = explain_plan(libpq_url(stale.url), text, issued, mode=mode)
    whole = [n for n in plan_nodes(plan) if n["Node Type"] in ("Hash", "Sort", "Materialize") and _reads_runs(n)]
    assert not whole, json.dumps(plan, indent=1)
    scans = [n for n in plan_nodes(plan) if n.get("Relation Name") == "runs" and "Scan" in n["Node Type"]]
    assert scans and all(_probed(n) for n in scans), json.dumps(plan, indent=1)
