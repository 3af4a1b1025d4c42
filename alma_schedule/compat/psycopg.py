"""psycopg's undocumented and libpq-level parts that we use, each behind one function
(``docs/architecture.md``, "Private calls into dependencies"; pinned by
``tests/compat/test_compat_psycopg.py``).
docs/architecture.md, section "The modules, in detail" (compat/psycopg.py).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

__all__ = [
    "in_pipeline", "libpq_version", "prepare_threshold_of", "register_binary_lists", "result_failed",
    "result_has_rows", "set_prepare_threshold", "stream",
]  # fmt: skip


def prepare_threshold_of(dbapi_conn: Any) -> int | None:
    """A connection's ``prepare_threshold`` (how many executions before psycopg prepares a statement;
    None: never). A documented attribute, kept here because the SQL store's plan-cache rule
    (PG_PLAN_CACHE, :mod:`alma_schedule.stores.postgres.hot`) depends on its exact semantics."""
    value: int | None = dbapi_conn.prepare_threshold
    return value


def set_prepare_threshold(dbapi_conn: Any, value: int | None) -> None:
    """Set it (0: prepare at the first execution; None: never)."""
    dbapi_conn.prepare_threshold = value


def register_binary_lists(dbapi_conn: Any) -> None:
    """Dump Python lists as binary PostgreSQL arrays on ``dbapi_conn`` (a new psycopg connection).

    docs/architecture.md, "The modules, in detail" (compat/psycopg.py, register_binary_lists).
    """
    from psycopg.types.array import ListBinaryDumper

    dbapi_conn.adapters.register_dumper(list, ListBinaryDumper)


def libpq_version() -> int:
    """The libpq version psycopg runs on (``psycopg.pq.version()``: 170000 for 17.0), libpq level."""
    import psycopg

    return int(psycopg.pq.version())


def in_pipeline(driver: Any) -> bool:
    """Whether the psycopg connection ``driver`` is in pipeline mode: libpq's pipeline status of its
    ``pgconn`` is not ``psycopg.pq.PipelineStatus.OFF`` (``ON``, or ``ABORTED`` after an error).

    docs/architecture.md, "The modules, in detail" (compat/psycopg.py, in_pipeline).
    """
    from psycopg.pq import PipelineStatus

    return bool(driver.pgconn.pipeline_status != PipelineStatus.OFF)


def result_has_rows(cur: Any) -> bool | None:
    """Whether the last result of the psycopg cursor ``cur`` is a result set (libpq's status
    ``TUPLES_OK`` on ``cur.pgresult``); None when no result is attached (a pipeline that ended
    before its result came back).

    docs/architecture.md, "The modules, in detail" (compat/psycopg.py, result_has_rows).
    """
    from psycopg.pq import ExecStatus

    res = cur.pgresult
    if res is None:
        return None
    return bool(res.status == ExecStatus.TUPLES_OK)


def result_failed(cur: Any) -> bool:
    """Whether the last result of the psycopg cursor ``cur`` is an error (libpq's status
    ``FATAL_ERROR`` on ``cur.pgresult``): in a failed pipeline, which statement failed.

    docs/architecture.md, "The modules, in detail" (compat/psycopg.py, result_failed).
    """
    from psycopg.pq import ExecStatus

    res = cur.pgresult
    return res is not None and bool(res.status == ExecStatus.FATAL_ERROR)


def stream(cur: Any, sql: str, args: Any, size: int) -> Generator[tuple[Any, ...], None, None]:
    """``cur.stream(sql, args, size=size)``: the rows of one statement as the server sends them, in
    libpq's chunked rows mode (libpq 17 and later) when ``size`` > 1.

    docs/architecture.md, "The modules, in detail" (compat/psycopg.py, stream).
    """
    rows: Generator[tuple[Any, ...], None, None] = cur.stream(sql, args, size=size)
    return rows
