"""The store's PostgreSQL pool hands back the connection a statement just returned (LIFO): the
statements of one tick, one after the other, run on ONE backend, not on each pooled connection in
turn (a FIFO pool woke a backend idle since the statement before, and after a VACUUM of ``runs``
each connection re-planned its cached plans)."""

from __future__ import annotations

import pytest

from alma_schedule.testing.builders import T0, TIMERS, fire_due, register
from tests.stores.sql_support import opened, pg_database

pytestmark = pytest.mark.postgres


def _pid(store: object) -> int:
    with store._tx(read=True) as conn:  # type: ignore[attr-defined]
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar())


def test_sequential_statements_reuse_the_connection_just_returned() -> None:
    with pg_database() as url, opened(url) as store:
        with store.engine.connect() as a, store.engine.connect() as b:  # two connections in the pool
            assert (
                a.exec_driver_sql("SELECT pg_backend_pid()").scalar()
                != b.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            )
        first = _pid(store)
        register(store, "r1", next_due_at=T0)
        store.probe_tick(T0, TIMERS.resend_first)
        assert store.claim_due(T0, 10, fire_due, TIMERS).claimed
        store.record_tick(T0, 1, 0.0, 0.0)
        assert {_pid(store) for _ in range(4)} == {first}
