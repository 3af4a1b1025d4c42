"""Statements whose answers this process reads while it works on: sent ahead in psycopg's pipeline
mode (:func:`meanwhile`) or streamed in chunks as the database sends rows (:func:`streamed`).
Errors leave as :func:`.hot.all_rows`' would.
docs/architecture.md, section "The modules, in detail" (stores/postgres/ahead.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Connection

from alma_schedule.compat import psycopg as pg_compat
from alma_schedule.compat import sqlalchemy as sa_compat
from alma_schedule.stores.postgres import hot

__all__ = ["meanwhile", "out_of_pipeline", "streamed"]


@contextmanager
def meanwhile(
    conn: Connection, schema: str, statements: Sequence[tuple[Any, Mapping[str, Any]]]
) -> Iterator[list[Callable[[], list[Any]]]]:
    """Send each ``(stmt, params)`` on entry, pipelined; yield one function per statement that returns its
    rows after the block (one round trip). A failed statement raises at the block's end; inside a
    transaction the pipeline commits nothing.
    docs/architecture.md, section "The modules, in detail" (stores/postgres/ahead.py).
    """
    import psycopg

    if not statements:  # nothing to send: no pipeline, no round trip
        yield []
        return
    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    custom = bool(conn.get_execution_options().get(hot.CUSTOM_PLANS))
    if pg_compat.in_pipeline(driver):
        raise RuntimeError("hot.meanwhile does not nest: send every statement of the block in one call")
    sent: list[hot.Sent] = []
    sending = None
    try:
        with driver.pipeline():
            if conn.connection.info.pop(_STREAMED, False):
                # after a chunked stream libpq keeps that mode for a pipeline's FIRST statement (it
                # resets it for a statement sent outside a pipeline, or for a pipeline's later ones):
                # a first statement that returns no row takes it (psycopg refuses a chunk in a pipeline)
                psycopg.RawCursor(driver).execute(_TAKES_THE_MODE)
            for stmt, params in statements:
                sending = hot.rendered(stmt, schema)
                sent.append(hot._send(conn, sending, params, prepare=custom))
            yield [one.rows for one in sent]
    except psycopg.Error as exc:
        failed = _failed(sent)
        sql = failed.sql if failed is not None else sending.sql if sending is not None else ""
        hot._raise(conn, driver, None, exc, sql, failed.args if failed is not None else [])
    finally:
        out_of_pipeline(conn, driver)


def _failed(sent: Sequence[hot.Sent]) -> hot.Sent | None:
    """The statement of a pipeline that failed (the first whose result is an error), else its last."""
    for one in sent:
        if pg_compat.result_failed(one.cur):
            return one
    return sent[-1] if sent else None


def out_of_pipeline(conn: Connection, driver: Any) -> None:
    """After a pipeline's end: a connection whose pipeline could not end (lost meanwhile) is
    invalidated, never pooled in pipeline mode."""
    if pg_compat.in_pipeline(driver) and not conn.invalidated:
        conn.invalidate()


#: libpq's chunked rows mode (``PQsetChunkedRowsMode``) came in version 17.
_CHUNKED_LIBPQ = 170000
#: The connection-info key of a connection that streamed since (:func:`meanwhile` reads it).
_STREAMED = "alma_streamed"
#: A statement that returns no row (and does nothing): sent first in a pipeline after a stream.
_TAKES_THE_MODE = "SELECT WHERE false"


def streamed(
    conn: Connection, stmt: Any, schema: str, params: Mapping[str, Any], size: int
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``stmt`` in chunks of at most ``size`` as the database sends them (one chunk on a libpq
    older than 17). Reading every chunk ends the statement; stopping early cancels it.
    docs/architecture.md, section "The modules, in detail" (stores/postgres/ahead.py).
    """
    import psycopg

    if pg_compat.libpq_version() < _CHUNKED_LIBPQ:
        yield hot.all_rows(conn, stmt, schema, params)
        return
    driver, cur, sql, args = hot.cursor_for(conn, hot.rendered(stmt, schema), params)
    rows = pg_compat.stream(cur, sql, args, size)
    conn.connection.info[_STREAMED] = True
    try:
        chunk: list[tuple[Any, ...]] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) == size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk
        sa_compat.fire_after_cursor_execute(conn, cur, sql, args)
    except psycopg.Error as exc:
        hot._raise(conn, driver, cur, exc, sql, args)
    finally:
        rows.close()  # a stream left early: psycopg cancels the statement and reads what came
        cur.close()
