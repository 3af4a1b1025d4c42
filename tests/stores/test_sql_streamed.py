"""PostgreSQL: a statement's rows streamed in chunks as the database sends them
(:func:`alma_schedule.stores.postgres.ahead.streamed`, the claim's locking select decided as it arrives):
every row once, in order, in chunks of the size asked; the first chunk reaches this process before
the statement has finished; a failure leaves as :func:`~alma_schedule.stores.postgres.hot.all_rows`'
would; a caller that stops early leaves a usable connection; and a pipeline right after a stream
works (libpq keeps the chunked mode for a pipeline's first statement: ``ahead.meanwhile`` sends one
that returns no row first)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from alma_schedule.errors import StoreError
from alma_schedule.stores.postgres import ahead
from alma_schedule.stores.sql.errors import mapped_errors
from tests.stores.sql_support import libpq_url, opened, pg_database

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with pg_database() as url:
        yield url


def _series(n: int) -> sa.Select[tuple[int]]:
    return sa.select(sa.func.generate_series(1, sa.cast(sa.bindparam("n", type_=sa.Integer), sa.Integer)))


def test_every_row_once_in_order_in_chunks_of_the_size_asked(url: str) -> None:
    with opened(url) as store, store.engine.connect() as conn:
        chunks = list(ahead.streamed(conn, _series(250), "alma", {"n": 250}, 100))
        conn.rollback()
    if psycopg.pq.version() < ahead._CHUNKED_LIBPQ:
        pytest.skip("this libpq has no chunked rows mode: one chunk")
    assert [len(c) for c in chunks] == [100, 100, 50]
    assert [row[0] for chunk in chunks for row in chunk] == list(range(1, 251))


def test_the_first_chunk_arrives_before_the_statement_ends(url: str) -> None:
    """Rows of a statement that waits, before its fifth row, for an advisory lock this test holds
    (each row wider than the server's 8 kB output buffer, so the server sends a row's head as it is
    made and its tail with the next one): the first chunk is here while the statement is still
    active (it cannot finish before the test lets the lock go; pg_stat_activity says so), and the rest
    arrive after. Order, not timing."""
    if psycopg.pq.version() < ahead._CHUNKED_LIBPQ:
        pytest.skip("this libpq has no chunked rows mode")
    waiting = sa.text(
        "SELECT i, repeat('x', 20000) AS wide, CASE WHEN i = 5 THEN pg_advisory_xact_lock(774412) END AS waited"
        " FROM generate_series(1, 6) AS i"
    )
    got: list[list[int]] = []
    with (
        opened(url) as store,
        store.engine.connect() as conn,
        psycopg.connect(libpq_url(url), autocommit=True) as holder,
    ):
        holder.execute("SELECT pg_advisory_lock(774412)")
        pid = conn.connection.dbapi_connection.info.backend_pid
        for chunk in ahead.streamed(conn, waiting, "alma", {}, 2):
            if not got:  # the first chunk: the statement has not finished (it cannot pass row 5 yet)
                state = holder.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
                assert state == ("active",), state  # still running, or waiting for the lock at row 5
                holder.execute("SELECT pg_advisory_unlock(774412)")
            got.append([row[0] for row in chunk])
        conn.rollback()
    assert got == [[1, 2], [3, 4], [5, 6]]


def test_a_failure_mid_stream_is_a_store_error_and_the_pool_works_on(url: str) -> None:
    failing = sa.text("SELECT 10 / (3 - i) FROM generate_series(1, 5) AS i")
    with opened(url) as store:
        with store.engine.connect() as conn, pytest.raises(StoreError) as caught, mapped_errors(url):
            for _ in ahead.streamed(conn, failing, "alma", {}, 1):
                pass
        assert "division by zero" in str(caught.value)
        assert store.count_routines() == {"enabled": 0, "paused": 0, "disabled": 0}


def test_a_caller_that_stops_early_leaves_a_usable_connection(url: str) -> None:
    """As a claim that raised while deciding: its transaction rolls back, the connection works on."""
    with opened(url, pool_size=1, max_overflow=0) as store:
        with store.engine.connect() as conn:
            with pytest.raises(RuntimeError, match="stopped"), conn.begin():
                stream = ahead.streamed(conn, _series(100_000), "alma", {"n": 100_000}, 100)
                assert len(next(stream)) == 100
                stream.close()  # psycopg cancels the statement and reads what came
                raise RuntimeError("stopped")
            assert conn.exec_driver_sql("SELECT 42").scalar() == 42
            conn.rollback()
        assert store.count_routines() == {"enabled": 0, "paused": 0, "disabled": 0}  # the one connection


def test_a_pipeline_right_after_a_stream_gets_its_rows(url: str) -> None:
    with opened(url) as store, store.engine.connect() as conn:
        with conn.begin():
            rows = [r for chunk in ahead.streamed(conn, _series(250), "alma", {"n": 250}, 100) for r in chunk]
            assert len(rows) == 250
            with ahead.meanwhile(conn, "alma", [(_series(3), {"n": 3}), (_series(2), {"n": 2})]) as answers:
                pass
            assert [a() for a in answers] == [[(1,), (2,), (3,)], [(1,), (2,)]]


def test_the_libpq_quirk_the_pipeline_works_around(url: str) -> None:
    """Without the first statement ``meanwhile`` sends, a pipeline's first statement after a chunked
    stream comes back in chunks, which psycopg refuses: if this ever passes, libpq was fixed."""
    if psycopg.pq.version() < ahead._CHUNKED_LIBPQ:
        pytest.skip("this libpq has no chunked rows mode")
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("BEGIN")
        assert sum(1 for _ in psycopg.RawCursor(conn).stream("SELECT generate_series(1, 250)", size=100)) == 250
        with pytest.raises(psycopg.InternalError, match="TUPLES_CHUNK"):
            with conn.pipeline():
                psycopg.RawCursor(conn).execute("SELECT generate_series(1, 3)")
