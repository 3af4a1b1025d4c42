"""SQL statements of ``migrate``: the namespace, what a database already holds, and the adoption of a
0.1.0 store (its tables moved from the default schema into the namespace).
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/adopt.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

_pg_tables = sa.table("tables", sa.column("table_schema"), sa.column("table_name"), schema="information_schema")
_pg_namespaces = sa.table("pg_namespace", sa.column("nspname"), schema="pg_catalog")
_sqlite_master = sa.table(
    "sqlite_master", sa.column("type"), sa.column("name"), sa.column("tbl_name"), sa.column("sql")
)


def _q(conn: Connection, name: str) -> str:
    return conn.dialect.identifier_preparer.quote(name)


def current_schema() -> sa.Select[Any]:
    """PostgreSQL: the schema unqualified names resolve to (where 0.1.0 created its tables)."""
    return sa.select(sa.func.current_schema())


def schema_exists(name: str) -> sa.Select[Any]:
    return sa.select(sa.func.count()).select_from(_pg_namespaces).where(_pg_namespaces.c.nspname == name)


def create_schema(conn: Connection, name: str) -> sa.TextClause:
    return sa.text(f"CREATE SCHEMA IF NOT EXISTS {_q(conn, name)}")


def schema_tables(schema: str | None, names: Sequence[str]) -> sa.Select[Any]:
    """Which of ``names`` exist as tables in PostgreSQL's ``schema``."""
    return sa.select(_pg_tables.c.table_name).where(
        _pg_tables.c.table_schema == schema, _pg_tables.c.table_name.in_(list(names))
    )


def file_tables(names: Sequence[str]) -> sa.Select[Any]:
    """Which of ``names`` exist as tables in the SQLite file."""
    return sa.select(_sqlite_master.c.name).where(
        _sqlite_master.c.type == "table", _sqlite_master.c.name.in_(list(names))
    )


def _version_table(schema: str | None) -> sa.TableClause:
    return sa.table("alembic_version", sa.column("version_num", sa.String(32)), schema=schema)


def legacy_versions(schema: str | None) -> sa.Select[Any]:
    """The revisions a default-schema ``alembic_version`` holds (0.1.0 wrote ``0001_initial``)."""
    table = _version_table(schema)
    return sa.select(table.c.version_num).order_by(table.c.version_num)


def forget_legacy_version(schema: str | None, revision: str) -> Any:
    """Remove 0.1.0's row from ``alembic_version`` (other rows, a fleet's, stay)."""
    table = _version_table(schema)
    return sa.delete(table).where(table.c.version_num == revision)


def drop_legacy_version_table(conn: Connection, schema: str | None) -> sa.TextClause:
    """Drop ``alembic_version`` once it is empty (it was 0.1.0's alone)."""
    name = _q(conn, "alembic_version")
    return sa.text(f"DROP TABLE {_q(conn, schema) + '.' if schema else ''}{name}")


def move_table(conn: Connection, table: str, *, source: str | None, target: str) -> sa.TextClause:
    """PostgreSQL: ``ALTER TABLE source.table SET SCHEMA target``."""
    return sa.text(f"ALTER TABLE {_q(conn, source or 'public')}.{_q(conn, table)} SET SCHEMA {_q(conn, target)}")


def rename_table(conn: Connection, table: str, target: str) -> sa.TextClause:
    """SQLite: ``ALTER TABLE table RENAME TO target`` (the prefixed name)."""
    return sa.text(f"ALTER TABLE {_q(conn, table)} RENAME TO {_q(conn, target)}")


def sqlite_indexes(table: str) -> sa.Select[Any]:
    """SQLite: the named (non-automatic) indexes of ``table`` with their ``CREATE`` text."""
    return (
        sa.select(_sqlite_master.c.name, _sqlite_master.c.sql)
        .where(_sqlite_master.c.type == "index", _sqlite_master.c.tbl_name == table, _sqlite_master.c.sql.is_not(None))
        .order_by(_sqlite_master.c.name)
    )


def drop_index(conn: Connection, name: str) -> sa.TextClause:
    return sa.text(f"DROP INDEX {_q(conn, name)}")


_INDEX_HEAD = re.compile(r'^(\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+)("[^"]+"|\w+)(\s+ON\s)', re.I)


def renamed_index(conn: Connection, create_sql: str, new_name: str) -> sa.TextClause:
    """SQLite: an index's own ``CREATE INDEX`` text (as ``sqlite_master`` keeps it) under ``new_name``."""
    text, n = _INDEX_HEAD.subn(lambda m: m.group(1) + _q(conn, new_name) + m.group(3), create_sql, count=1)
    if n != 1:
        raise ValueError(f"not a CREATE INDEX statement: {create_sql[:80]!r}")
    return sa.text(text.replace(":", r"\:"))
