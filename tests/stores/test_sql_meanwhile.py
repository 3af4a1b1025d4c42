"""PostgreSQL: statements sent ahead (:func:`alma_schedule.stores.postgres.ahead.meanwhile`, the claim's
statements that make room while the run records are built) run on the server, in order, while the
block's Python runs, their rows come after the block, and a failure leaves as
:func:`~alma_schedule.stores.postgres.hot.all_rows`' would, never a connection left in pipeline mode."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa
from psycopg.pq import PipelineStatus

from alma_schedule.errors import StoreError, StoreUnavailable
from alma_schedule.stores.postgres import ahead, hot
from alma_schedule.stores.sql.errors import mapped_errors
from tests.stores.sql_support import libpq_url, opened, pg_admin, pg_database

pytestmark = pytest.mark.postgres

LOCK = 0x616C6D61  # an advisory lock key of this test's own


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with pg_database() as url:
        yield url


def _lock_holder(store_url: str) -> int | None:
    """The backend holding this test's advisory lock, asked on a connection of its own."""
    with psycopg.connect(libpq_url(store_url)) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND granted", (LOCK,)
        ).fetchone()
        return int(row[0]) if row else None


def test_the_statement_runs_while_the_block_runs_and_its_rows_come_after(url: str) -> None:
    stmt = sa.select(
        sa.func.pg_advisory_xact_lock(sa.cast(sa.bindparam("k", type_=sa.BigInteger), sa.BigInteger)),
        sa.func.pg_backend_pid(),
    )
    with opened(url) as store, store.engine.connect() as conn:
        with conn.begin():
            with ahead.meanwhile(conn, "alma", [(stmt, {"k": LOCK})]) as (rows,):
                deadline = time.monotonic() + 10
                while (holder := _lock_holder(url)) is None and time.monotonic() < deadline:
                    time.sleep(0.01)  # the server took the lock: the statement ran before the block's end
                assert holder is not None
            (got,) = rows()
            assert got[1] == holder
            assert conn.connection.driver_connection.pgconn.pipeline_status == PipelineStatus.OFF
            assert hot.all_rows(conn, sa.select(sa.literal_column("1")), "alma", {}) == [(1,)]
        assert _lock_holder(url) is None  # the transaction ended: the Sync committed nothing early


def test_a_failed_statement_raises_at_the_block_end_as_a_store_error(url: str) -> None:
    one_over = sa.select(sa.literal_column("1") / sa.cast(sa.bindparam("zero", type_=sa.Integer), sa.Integer))
    with opened(url) as store:
        with store.engine.connect() as conn, pytest.raises(StoreError) as caught, mapped_errors(url):
            conn.execution_options(isolation_level="AUTOCOMMIT")
            with ahead.meanwhile(conn, "alma", [(one_over, {"zero": 0})]):
                pass
        assert type(caught.value) is StoreError and "division by zero" in str(caught.value)
        assert store.count_routines() == {"enabled": 0, "paused": 0, "disabled": 0}  # the pool works on


def test_a_backend_terminated_meanwhile_is_unavailable_and_the_connection_invalidated(url: str) -> None:
    stmt = sa.select(sa.func.pg_backend_pid())
    with opened(url) as store, store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        slow = sa.select(sa.func.pg_sleep(sa.literal_column("0.5")), stmt.scalar_subquery())
        with pytest.raises(StoreUnavailable), mapped_errors(url):
            with ahead.meanwhile(conn, "alma", [(slow, {})]):
                pg_admin(f"SELECT pg_terminate_backend({int(pid or 0)})")
        assert conn.invalidated


def _temp_table(conn: sa.Connection) -> None:
    conn.exec_driver_sql("CREATE TEMP TABLE meanwhile_t (n int) ON COMMIT DROP")


def test_several_statements_run_in_order_and_each_answers_after_the_block(url: str) -> None:
    put = sa.text("INSERT INTO meanwhile_t SELECT CAST(:n AS int) RETURNING n").bindparams(
        sa.bindparam("n", type_=sa.Integer)
    )
    total = sa.text("SELECT CAST(sum(n) AS int), pg_backend_pid() FROM meanwhile_t")
    with opened(url) as store, store.engine.connect() as conn:
        with conn.begin():
            _temp_table(conn)
            with ahead.meanwhile(conn, "alma", [(put, {"n": 2}), (put, {"n": 40}), (total, {})]) as answers:
                assert len(answers) == 3
            assert [a() for a in answers[:2]] == [[(2,)], [(40,)]]
            (summed,) = answers[2]()
            assert summed[0] == 42  # the third saw what the two before it wrote
            assert conn.connection.driver_connection.pgconn.pipeline_status == PipelineStatus.OFF
            conn.rollback()


def test_a_failed_first_statement_is_named_and_the_rest_do_not_run(url: str) -> None:
    one_over = sa.select(sa.literal_column("1") / sa.cast(sa.bindparam("zero", type_=sa.Integer), sa.Integer))
    later = sa.select(sa.func.pg_advisory_lock(sa.cast(sa.bindparam("k", type_=sa.BigInteger), sa.BigInteger)))
    with opened(url) as store:
        with store.engine.connect() as conn, pytest.raises(StoreError) as caught, mapped_errors(url):
            conn.execution_options(isolation_level="AUTOCOMMIT")
            with ahead.meanwhile(conn, "alma", [(one_over, {"zero": 0}), (later, {"k": LOCK})]):
                pass
        assert "division by zero" in str(caught.value)
        assert _lock_holder(url) is None  # the statement after the failed one never ran
        assert store.count_routines() == {"enabled": 0, "paused": 0, "disabled": 0}


def test_nothing_to_send_opens_no_pipeline_and_nesting_is_refused(url: str) -> None:
    one = sa.select(sa.literal_column("1"))
    with opened(url) as store, store.engine.connect() as conn:
        with conn.begin():
            with ahead.meanwhile(conn, "alma", []) as answers:
                assert answers == []
                assert conn.connection.driver_connection.pgconn.pipeline_status == PipelineStatus.OFF
            with pytest.raises(RuntimeError, match="does not nest"):
                with ahead.meanwhile(conn, "alma", [(one, {})]):
                    with ahead.meanwhile(conn, "alma", [(one, {})]):
                        pass
