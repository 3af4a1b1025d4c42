"""The generic-plan trap: a long-lived process never runs the supersede UPDATE on a generic plan.

psycopg prepares a statement from its 5th execution; PostgreSQL then switches a prepared statement
to its cached generic plan after 5 custom ones when it looks no dearer. A generic plan assumes 10
rows for our ``unnest`` key arrays and trusts statistics taken before the tick claimed its runs, so
it becomes a nested loop over every claimed run times the keys (seconds per 1,000-key batch).

The data reproduces that: 5,000 finished runs ANALYZEd with no claimed run, then 3,000 claimed runs
the statistics do not know (autovacuum off on this test database, so they stay unknown, as they are
within one tick). The control shows PostgreSQL takes the generic plan here when the store's session
setting is lifted; with it, every execution gets a custom plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
import sqlalchemy as sa

from alma_schedule.stores.sql import SqlStore
from alma_schedule.stores.sql import queries as q
from tests.stores.sql_load import copy_runs, history_rows, open_rows, routine_id
from tests.stores.sql_support import libpq_url, opened, pg_database

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


def _plans(conn: sa.Connection) -> tuple[int, int]:
    """(generic, custom) plan counts of this session's prepared supersede statement."""
    row = conn.exec_driver_sql(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        " WHERE statement LIKE 'UPDATE %%runs SET state%%'"
    ).one()
    conn.commit()  # never a ROLLBACK: psycopg deallocates its prepared statements on one
    return int(row[0]), int(row[1])


def test_the_supersede_statement_never_takes_a_generic_plan(stale: SqlStore) -> None:
    with stale.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "force_custom_plan"
        conn.rollback()
        for batch in range(12):
            assert _supersede(conn, batch) == KEYS
        generic, custom = _plans(conn)
        assert generic == 0 and custom >= 7  # prepared from the 5th execution on: each one planned for its keys
        # the control: PostgreSQL's default mode takes the generic plan for the same statement here
        conn.exec_driver_sql("SET plan_cache_mode = auto")
        conn.commit()
        for batch in range(12, 16):
            assert _supersede(conn, batch) == KEYS
        assert _plans(conn)[0] > 0
        conn.invalidate()  # never hand the changed session back to the pool
