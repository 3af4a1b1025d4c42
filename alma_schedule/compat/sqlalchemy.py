"""SQLAlchemy's private parts that we use, each behind one function (``docs/architecture.md``,
"Private calls into dependencies"; pinned by ``tests/compat/test_compat_sqlalchemy.py``).

Why any: the hot statements of the SQL store (:mod:`alma_schedule.stores.sql.hot`, :mod:`.ahead`)
are compiled by SQLAlchemy ONCE and then sent on the checked-out psycopg connection with a raw
cursor, skipping SQLAlchemy's per-execution work; so they do themselves the two steps of that work
that must still happen (the schema names written into the text, the engine's cursor listeners told).
And rows are read by column name through ``Row._mapping``.

SQLAlchemy is a core dependency, but nothing is imported here at import time (annotations only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Dialect, Row, RowMapping

__all__ = ["fire_after_cursor_execute", "fire_before_cursor_execute", "render_schema_translates", "row_mapping"]


def row_mapping(row: Row[Any]) -> RowMapping:
    """``row._mapping``: the row as a read-only mapping of its columns by name.

    SQLAlchemy documents ``Row._mapping`` (its underscore keeps it clear of column names), so this one
    is the least private of the four here; it is reached here all the same so that one rule holds
    (no underscore name of SQLAlchemy outside :mod:`alma_schedule.compat`). Used where the SQL store
    reads a row by column name (a routine's, a version's, a start's flags)."""
    return row._mapping


def render_schema_translates(dialect: Dialect, sql: str, schema_map: Mapping[str | None, str | None]) -> str:
    """``dialect.identifier_preparer._render_schema_translates(sql, schema_map)``: the text of a
    statement compiled with ``schema_translate_map``, its schema placeholders (``__[SCHEMA_<name>]``)
    replaced by the schemas ``schema_map`` names.

    Private: the method of ``IdentifierPreparer`` that SQLAlchemy's own execution calls on every
    execution of such a statement (a regex over its text). :func:`alma_schedule.stores.sql.hot.rendered`
    compiles a hot statement once per (statement, schema) and sends the text itself, so it renders
    the namespace (``docs/architecture.md``, "The SQL store's namespace") once, with this."""
    return dialect.identifier_preparer._render_schema_translates(sql, dict(schema_map))


def fire_before_cursor_execute(conn: Connection, cursor: Any, sql: str, args: Any) -> tuple[str, Any]:
    """Tell the engine's ``before_cursor_execute`` listeners of one execution that we send ourselves on
    ``conn``'s driver connection, as SQLAlchemy's execution tells them (``context=None``,
    ``executemany=False``); each may rewrite the text and the parameters: the ``(sql, args)`` to send.

    Relies on ``Connection.dispatch`` (the event system's dispatcher of the connection, joined with
    its engine's, which SQLAlchemy fires internally: calling it by hand is not a documented use), on
    each listener being called ``(conn, cursor, statement, parameters, context, executemany)``, and on
    a listener registered without ``retval=True`` being wrapped to hand back ``(statement,
    parameters)`` unchanged. Keeps echo, tracing and the tests' statement counters seeing the hot
    statements (:mod:`alma_schedule.stores.sql.hot`)."""
    for before in conn.dispatch.before_cursor_execute:
        sql, args = before(conn, cursor, sql, args, None, False)
    return sql, args


def fire_after_cursor_execute(conn: Connection, cursor: Any, sql: str, args: Any) -> None:
    """Tell the engine's ``after_cursor_execute`` listeners that an execution we sent ourselves (see
    :func:`fire_before_cursor_execute`: the same reliance on ``Connection.dispatch`` and the same
    call shape) has its result."""
    for after in conn.dispatch.after_cursor_execute:
        after(conn, cursor, sql, args, None, False)
