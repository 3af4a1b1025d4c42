"""The undocumented and libpq-level shapes of psycopg that :mod:`alma_schedule.compat.psycopg`
relies on, held against the INSTALLED psycopg (no mock), on a fresh PostgreSQL database where a
server is needed: a release that changes one fails here, before the SQL store's hot path
(pipelines, streamed reads, binary arrays) misbehaves."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.adapt import Dumper, PyFormat

from alma_schedule.compat.psycopg import (
    in_pipeline,
    libpq_version,
    prepare_threshold_of,
    register_binary_lists,
    result_failed,
    result_has_rows,
    set_prepare_threshold,
    stream,
)


@pytest.fixture
def driver(pg_url: str) -> Iterator[psycopg.Connection]:
    """A psycopg connection (autocommit, as the store's checked-out ones) to a fresh database."""
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as conn:
        yield conn


@pytest.mark.unit
def test_the_binary_list_dumper_and_the_stream_generator_are_there() -> None:
    from psycopg.types.array import ListBinaryDumper

    assert issubclass(ListBinaryDumper, Dumper) and ListBinaryDumper.format == psycopg.pq.Format.BINARY
    assert inspect.isgeneratorfunction(psycopg.Cursor.stream)  # its close() is what ends a stream early
    assert "size" in inspect.signature(psycopg.Cursor.stream).parameters
    assert issubclass(psycopg.RawCursor, psycopg.Cursor)
    assert libpq_version() == psycopg.pq.version() and libpq_version() >= 100000
    assert {s.name for s in psycopg.pq.PipelineStatus} >= {"OFF", "ON", "ABORTED"}


@pytest.mark.integration
def test_lists_are_dumped_binary_and_round_trip_exactly(driver: psycopg.Connection) -> None:
    from psycopg.types.array import ListBinaryDumper

    register_binary_lists(driver)
    assert driver.adapters.get_dumper(list, PyFormat.AUTO) is ListBinaryDumper
    texts = ['a"b', "c\\d", None, "é"]
    assert driver.execute("SELECT %s::text[]", [texts]).fetchone() == (texts,)
    assert driver.execute("SELECT %s::bigint[]", [[1, None, 2**40]]).fetchone() == ([1, None, 2**40],)


@pytest.mark.integration
def test_the_pipeline_status_is_read_on_the_pgconn(driver: psycopg.Connection) -> None:
    assert in_pipeline(driver) is False
    with driver.pipeline():
        assert in_pipeline(driver) is True
    assert in_pipeline(driver) is False
    cur = psycopg.RawCursor(driver)
    with pytest.raises(psycopg.errors.DivisionByZero), driver.pipeline():
        cur.execute("SELECT 1/0")
    assert in_pipeline(driver) is False  # the failed pipeline ended too
    assert driver.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.integration
def test_a_result_status_says_whether_rows_came_back(driver: psycopg.Connection) -> None:
    cur = psycopg.RawCursor(driver)
    assert result_has_rows(cur) is None  # nothing executed: no result attached
    cur.execute("SELECT 1 WHERE false")
    assert result_has_rows(cur) is True and cur.fetchall() == []
    cur.execute("SET statement_timeout = 0")
    assert result_has_rows(cur) is False
    with driver.pipeline():  # the results are attached once the pipeline ended
        cur.execute("SELECT 7")
    assert result_has_rows(cur) is True and cur.fetchall() == [(7,)]
    assert result_failed(cur) is False
    failed = driver.pgconn.exec_(b"SELECT 1/0")  # libpq's own result of a failed statement
    assert failed.status == psycopg.pq.ExecStatus.FATAL_ERROR
    cur.pgresult = failed
    assert result_failed(cur) is True


@pytest.mark.integration
def test_a_failed_pipeline_statement_leaves_no_result_on_its_cursor(driver: psycopg.Connection) -> None:
    """psycopg raises a pipeline's error BEFORE it attaches the failed result to its cursor, so
    :func:`result_failed` finds no failed cursor there and ``ahead._failed`` falls back to the last
    statement sent. A psycopg that starts attaching it changes which statement an error names."""
    first, second, third = (psycopg.RawCursor(driver) for _ in range(3))
    with pytest.raises(psycopg.errors.DivisionByZero), driver.pipeline():
        first.execute("SELECT 1")
        second.execute("SELECT 1/0")
        third.execute("SELECT 3")
    assert result_has_rows(first) is True
    assert second.pgresult is None and third.pgresult is None
    assert [result_failed(c) for c in (first, second, third)] == [False, False, False]


@pytest.mark.integration
def test_a_stream_left_early_is_closed_and_the_connection_goes_on(driver: psycopg.Connection) -> None:
    cur = psycopg.RawCursor(driver)
    rows = stream(cur, "SELECT generate_series(1, 200000)", None, 100)
    assert inspect.isgenerator(rows)
    assert [next(rows) for _ in range(3)] == [(1,), (2,), (3,)]
    rows.close()  # psycopg cancels the statement and reads what came
    cur.close()
    assert driver.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert driver.execute("SELECT 2").fetchone() == (2,)
    cur = psycopg.RawCursor(driver)
    assert list(stream(cur, "SELECT generate_series(1, 5)", None, 2)) == [(1,), (2,), (3,), (4,), (5,)]


def test_the_prepare_threshold_decides_when_a_statement_is_prepared_on_the_server(driver: psycopg.Connection) -> None:
    """0 prepares at the first execution, None never (the SQL store's plan-cache rule rests on it)."""
    assert prepare_threshold_of(driver) == 5  # psycopg's default
    set_prepare_threshold(driver, None)
    driver.execute("SELECT 1 + %s", (1,))
    assert driver.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
    set_prepare_threshold(driver, 0)
    driver.execute("SELECT 2 + %s", (1,))
    assert prepare_threshold_of(driver) == 0
    assert driver.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] >= 1  # type: ignore[index]
