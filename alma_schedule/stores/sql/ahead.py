"""Statements whose answers this process reads while it works on: sent ahead in psycopg's pipeline
mode (:func:`meanwhile`: the claim's statements that make room, then its INSERT, while the run
records and the messages are built) or streamed in chunks as the database sends their rows
(:func:`streamed`: the claim's locking select, decided as it arrives). Rendered and bound as
:mod:`.hot` renders them; errors leave as :func:`.hot.all_rows`' would. The libpq level they read (a
connection's pipeline status, a result's status, a stream's generator) is reached through
:mod:`alma_schedule.compat.psycopg` (``docs/architecture.md``, "Private calls into dependencies").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Connection

from alma_schedule.compat import psycopg as pg_compat
from alma_schedule.compat import sqlalchemy as sa_compat
from alma_schedule.stores.sql import hot

__all__ = ["meanwhile", "out_of_pipeline", "streamed"]


@contextmanager
def meanwhile(
    conn: Connection, schema: str, statements: Sequence[tuple[Any, Mapping[str, Any]]]
) -> Iterator[list[Callable[[], list[Any]]]]:
    """:func:`.hot.all_rows` of each ``(stmt, params)`` of ``statements``, all SENT on entry, in order, in
    the driver connection's pipeline mode: the server runs them one after the other (each sees what
    the ones before it wrote) while the block's Python runs; the pipeline ends with the block (its
    Sync: the one round trip :func:`.hot.all_rows` waits for, whatever the number of statements), and the
    yielded functions, one per statement, called after the block (and only then: inside it there is
    no answer yet), return their rows. A failed statement raises at the block's end, as
    :func:`.hot.all_rows` would (the statements after it did not run: PostgreSQL skips a pipeline's rest
    after an error); a connection whose pipeline could not end is invalidated (never pooled in
    pipeline mode). Inside a transaction the pipeline's Sync commits nothing."""
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
    """:func:`.hot.all_rows` of ``stmt`` (sent unnamed, planned for its parameters), its rows in
    chunks of at most ``size`` as the database sends them (libpq's chunked rows mode): the caller
    works on the first rows while the server still produces the others, on one connection and one
    thread. A libpq older than 17 has no such mode: then one chunk, once every row arrived. Reading
    every chunk ends the statement; a caller that stops early leaves psycopg to cancel it (the
    transaction then rolls back)."""
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
