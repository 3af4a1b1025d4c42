"""A pooled PostgreSQL connection whose backend was killed is never used: the next call succeeds.

The store sends no pre-ping (a round trip per transaction); :mod:`alma_schedule.stores.sql.liveness`
finds the closed socket on checkout instead. The control removes that listener: the same call then
fails on the dead connection, so the test shows the listener is what saves it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from alma_schedule.errors import StoreUnavailable
from alma_schedule.stores.sql import SqlStore
from alma_schedule.stores.sql.liveness import discard_if_closed
from alma_schedule.testing.builders import SCOPE, register
from tests.stores.sql_support import PG_ADMIN, opened, pg_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def store() -> Iterator[SqlStore]:
    with pg_database() as url, opened(url) as s:
        register(s, "r1")
        yield s


def _kill_backends(store: SqlStore) -> int:
    """pg_terminate_backend every connection of the store's pool; returns how many there were."""
    with store.engine.connect() as conn:
        database = conn.exec_driver_sql("SELECT current_database()").scalar()
        conn.rollback()
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:

        def pids() -> list[int]:
            rows = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'alma-schedule'",
                (database,),
            ).fetchall()
            return [r[0] for r in rows]

        killed = pids()
        for pid in killed:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 30
        while pids():  # gone from pg_stat_activity: the backend exited and closed its socket
            assert time.monotonic() < deadline, "the store's backends did not exit"
            time.sleep(0.05)
    return len(killed)


def test_the_call_after_a_killed_backend_succeeds(store: SqlStore) -> None:
    assert _kill_backends(store) >= 1
    got = store.get_routine(SCOPE, "r1")
    assert got is not None and got.routine_id == "r1"
    assert store.get_routine(SCOPE, "r1") == got


def test_without_the_checkout_check_the_dead_connection_fails_the_call(store: SqlStore) -> None:
    sa.event.remove(store.engine, "checkout", discard_if_closed)
    assert _kill_backends(store) >= 1
    with pytest.raises(StoreUnavailable):
        store.get_routine(SCOPE, "r1")
