"""SQLAlchemy's private parts that we use, each behind one function (``docs/architecture.md``,
"Private calls into dependencies"; pinned by ``tests/compat/test_compat_sqlalchemy.py``).

docs/architecture.md, section "The modules, in detail" (compat/sqlalchemy.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Dialect, Row, RowMapping

__all__ = ["fire_after_cursor_execute", "fire_before_cursor_execute", "render_schema_translates", "row_mapping"]


def row_mapping(row: Row[Any]) -> RowMapping:
    """``row._mapping``: the row as a read-only mapping of its columns by name.

    docs/architecture.md, "The modules, in detail" (compat/sqlalchemy.py, row_mapping).
    """
    return row._mapping


def render_schema_translates(dialect: Dialect, sql: str, schema_map: Mapping[str | None, str | None]) -> str:
    """``dialect.identifier_preparer._render_schema_translates(sql, schema_map)``: the text of a
    statement compiled with ``schema_translate_map``, its schema placeholders (``__[SCHEMA_<name>]``)
    replaced by the schemas ``schema_map`` names.

    docs/architecture.md, "The modules, in detail" (compat/sqlalchemy.py, render_schema_translates).
    """
    return dialect.identifier_preparer._render_schema_translates(sql, dict(schema_map))


def fire_before_cursor_execute(conn: Connection, cursor: Any, sql: str, args: Any) -> tuple[str, Any]:
    """Tell the engine's ``before_cursor_execute`` listeners of one execution that we send ourselves on
    ``conn``'s driver connection, as SQLAlchemy's execution tells them (``context=None``,
    ``executemany=False``); each may rewrite the text and the parameters: the ``(sql, args)`` to send.

    docs/architecture.md, "The modules, in detail" (compat/sqlalchemy.py, fire_before_cursor_execute).
    """
    for before in conn.dispatch.before_cursor_execute:
        sql, args = before(conn, cursor, sql, args, None, False)
    return sql, args


def fire_after_cursor_execute(conn: Connection, cursor: Any, sql: str, args: Any) -> None:
    """Tell the engine's ``after_cursor_execute`` listeners that an execution we sent ourselves (see
    :func:`fire_before_cursor_execute`: the same reliance on ``Connection.dispatch`` and the same
    call shape) has its result."""
    for after in conn.dispatch.after_cursor_execute:
        after(conn, cursor, sql, args, None, False)
