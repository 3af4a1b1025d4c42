"""Where our tables live in a shared database: the store's NAMESPACE (``ALMA_DATABASE_SCHEMA``).
docs/architecture.md, section "The modules, in detail" (stores/sql/namespace.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from alma_schedule.settings import DEFAULT_DATABASE_SCHEMA, check_database_schema

#: The placeholder schema every table is declared in (never a real schema: an engine that does not
#: translate it fails loudly, "schema ... does not exist", instead of writing to the default schema).
SCHEMA_TOKEN = "alma_schedule_schema"
#: Our own Alembic version table (in the namespace).
VERSION_TABLE = "schedule_version"
#: The tables of 0.1.0 (``0001_initial``), which lived in the default schema with ``alembic_version``.
LEGACY_TABLES = ("routines", "routine_versions", "runs", "spend", "heartbeat")
LEGACY_VERSION_TABLE = "alembic_version"
LEGACY_REVISION = "0001_initial"
#: SQLAlchemy's name of the one backend without schemas (its namespace a table prefix).
SQLITE = "sqlite"

__all__ = [
    "DEFAULT_DATABASE_SCHEMA",
    "LEGACY_REVISION",
    "LEGACY_TABLES",
    "LEGACY_VERSION_TABLE",
    "SCHEMA_TOKEN",
    "VERSION_TABLE",
    "Namespace",
    "postgres_rewrite",
    "sqlite_rewrite",
]

_QUALIFIED = re.compile(rf"\b{SCHEMA_TOKEN}\.")
# SQLite's CREATE INDEX names the index with its schema but the table without it (it must be the
# index's own schema): give the table its prefix too.
_CREATE_INDEX = re.compile(
    rf"^(\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?){SCHEMA_TOKEN}\.(\w+)\s+ON\s+(\w+)", re.I
)
# ALTER TABLE ... RENAME TO takes an unqualified new name (Alembic's batch mode uses it).
_RENAME = re.compile(rf"^(\s*ALTER\s+TABLE\s+{SCHEMA_TOKEN}\.\w+\s+RENAME\s+TO\s+)(\w+)", re.I)


def sqlite_rewrite(statement: str, prefix: str) -> str:
    """``statement`` with the placeholder schema turned into the table prefix ``prefix_``."""
    if SCHEMA_TOKEN not in statement:
        return statement
    statement = _CREATE_INDEX.sub(rf"\1{prefix}_\2 ON {prefix}_\3", statement, count=1)
    statement = _RENAME.sub(rf"\1{prefix}_\2", statement, count=1)
    return _QUALIFIED.sub(f"{prefix}_", statement)


def postgres_rewrite(statement: str, quoted_schema: str) -> str:
    """``statement`` with the placeholder schema turned into the real one, for the migration
    connection only: Alembic's ALTER statements (``add_column``, ``create_check_constraint``, ...)
    name the schema as text, which ``schema_translate_map`` never sees. Everything else was already
    translated and has no placeholder left."""
    if SCHEMA_TOKEN not in statement:
        return statement
    return _QUALIFIED.sub(f"{quoted_schema}.", statement)


@dataclass(frozen=True, slots=True)
class Namespace:
    """The store's namespace on one backend: the schema (PostgreSQL) or the prefix (SQLite)."""

    name: str
    dialect: str

    @classmethod
    def of(cls, schema: str | None, dialect: str) -> Namespace:
        """Validate ``schema`` (None: the default) as ``ALMA_DATABASE_SCHEMA`` would be."""
        return cls(check_database_schema(DEFAULT_DATABASE_SCHEMA if schema is None else schema), dialect)

    @property
    def postgres(self) -> bool:
        """Whether the backend has schemas (every backend but SQLite, whose namespace is a prefix)."""
        return self.dialect != SQLITE

    def table(self, base: str) -> str:
        """The name one of our tables has in the database (``alma.runs`` / ``alma_runs``)."""
        return f"{self.name}.{base}" if self.postgres else f"{self.name}_{base}"

    def index(self, base: str) -> str:
        """The name one of our indexes has (PostgreSQL: in the schema; SQLite: prefixed)."""
        return base if self.postgres else f"{self.name}_{base}"

    @property
    def version_table(self) -> str:
        """Alembic's ``version_table`` (SQLite: the prefixed name, in ``main``)."""
        return VERSION_TABLE if self.postgres else f"{self.name}_{VERSION_TABLE}"

    @property
    def version_table_schema(self) -> str | None:
        """Alembic's ``version_table_schema`` (SQLite: none)."""
        return self.name if self.postgres else None

    def describe(self) -> str:
        """For messages: ``schema 'alma'`` or ``table prefix 'alma_'``."""
        return f"schema {self.name!r}" if self.postgres else f"table prefix {self.name + '_'!r}"
