"""The private shapes of SQLAlchemy that :mod:`alma_schedule.compat.sqlalchemy` relies on, held
against the INSTALLED SQLAlchemy (no mock): a release that changes one fails here, before the SQL
store's hot path misbehaves. No server: an SQLite memory database and the PostgreSQL dialect's
compiler, which needs no connection."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import Row, RowMapping
from sqlalchemy.sql.compiler import IdentifierPreparer

from alma_schedule.compat.sqlalchemy import (
    fire_after_cursor_execute,
    fire_before_cursor_execute,
    render_schema_translates,
    row_mapping,
)
from alma_schedule.stores.sql.namespace import SCHEMA_TOKEN

pytestmark = pytest.mark.unit


def test_row_mapping_reads_a_row_by_column_name() -> None:
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT 1 AS one, 'x' AS ex")).first()
    assert isinstance(row, Row)
    mapping = row_mapping(row)
    assert isinstance(mapping, RowMapping)
    assert mapping["one"] == 1 and mapping["ex"] == "x"
    assert dict(mapping) == {"one": 1, "ex": "x"}
    engine.dispose()


def test_render_schema_translates_writes_the_schema_into_a_compiled_text() -> None:
    params = list(inspect.signature(IdentifierPreparer._render_schema_translates).parameters)
    assert params == ["self", "statement", "schema_translate_map"]
    table = sa.Table("runs", sa.MetaData(), sa.Column("n", sa.Integer), schema=SCHEMA_TOKEN)
    stmt = sa.select(table.c.n).where(table.c.n == sa.bindparam("n", type_=sa.Integer))
    dialect = PGDialect_psycopg(paramstyle="numeric_dollar")  # as hot.py's
    compiled = stmt.compile(dialect=dialect, schema_translate_map={SCHEMA_TOKEN: "alma"})
    assert "__[SCHEMA_" in compiled.string  # what SQLAlchemy leaves for the execution to render
    sql = render_schema_translates(dialect, compiled.string, {SCHEMA_TOKEN: "alma"})
    assert "__[SCHEMA_" not in sql and SCHEMA_TOKEN not in sql
    assert "FROM alma.runs" in sql and "$1" in sql


def _raw_cursor(conn: sa.Connection) -> Any:
    driver = conn.connection.driver_connection
    assert driver is not None
    return driver.cursor()


def _listening_engine() -> tuple[sa.Engine, list[tuple[Any, ...]]]:
    engine = sa.create_engine("sqlite://")
    seen: list[tuple[Any, ...]] = []

    @sa.event.listens_for(engine, "before_cursor_execute", retval=True)
    def rewrite(conn: Any, cursor: Any, sql: str, args: Any, context: Any, many: bool) -> tuple[str, Any]:
        seen.append(("rewrite", conn, cursor, sql, args, context, many))
        return sql.replace("SELECT 1", "SELECT 2"), (*args, "more")

    @sa.event.listens_for(engine, "before_cursor_execute")  # no retval: SQLAlchemy hands back its input
    def watch(conn: Any, cursor: Any, sql: str, args: Any, context: Any, many: bool) -> None:
        seen.append(("watch", conn, cursor, sql, args, context, many))

    @sa.event.listens_for(engine, "after_cursor_execute")
    def after(conn: Any, cursor: Any, sql: str, args: Any, context: Any, many: bool) -> None:
        seen.append(("after", conn, cursor, sql, args, context, many))

    return engine, seen


def test_the_before_listeners_fire_by_hand_in_order_each_given_what_the_one_before_returned() -> None:
    engine, seen = _listening_engine()
    with engine.connect() as conn:
        cursor = _raw_cursor(conn)
        sql, args = fire_before_cursor_execute(conn, cursor, "SELECT 1", ("a",))
        cursor.close()
    assert (sql, args) == ("SELECT 2", ("a", "more"))
    assert [s[0] for s in seen] == ["rewrite", "watch"]
    assert seen[0][1:] == (conn, cursor, "SELECT 1", ("a",), None, False)
    assert seen[1][1:] == (conn, cursor, "SELECT 2", ("a", "more"), None, False)
    engine.dispose()


def test_the_after_listeners_fire_by_hand() -> None:
    engine, seen = _listening_engine()
    with engine.connect() as conn:
        cursor = _raw_cursor(conn)
        fire_after_cursor_execute(conn, cursor, "SELECT 2", ("a",))
        cursor.close()
    assert seen == [("after", conn, cursor, "SELECT 2", ("a",), None, False)]
    engine.dispose()


def test_without_listeners_the_statement_is_unchanged() -> None:
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn:
        cursor = _raw_cursor(conn)
        assert fire_before_cursor_execute(conn, cursor, "SELECT 1", ()) == ("SELECT 1", ())
        fire_after_cursor_execute(conn, cursor, "SELECT 1", ())
        cursor.close()
    engine.dispose()
