"""Where our tables live in a shared database: the store's NAMESPACE (``ALMA_DATABASE_SCHEMA``).

Every table of :mod:`.schema` (and every index and the Alembic version table) is declared in ONE
placeholder schema, :data:`SCHEMA_TOKEN`. The engine (:func:`.engine.make_engine`) turns the
placeholder into the store's namespace, so the statements of :mod:`.queries` and the migration
scripts are written once and never name the namespace:

* PostgreSQL: a real schema (default ``alma``), through SQLAlchemy's ``schema_translate_map`` on
  every connection: ``alma_schedule_schema.runs`` is sent as ``alma.runs``. No ``search_path``
  startup option (PgBouncer in transaction mode rejects it) and no unqualified name: the fleet's
  own ``public.runs`` is never read or written.
* SQLite has no schemas (an attached "schema" is another file, which would break the one-file,
  one-transaction store), so the namespace is a table PREFIX: ``alma_runs``, ``alma_ix_runs_poll``
  (index names are global in an SQLite file, so they carry it too). The engine rewrites the
  placeholder in each statement as it is sent (:func:`sqlite_rewrite`, a ``before_cursor_execute``
  hook): that keeps every statement in :mod:`.queries` and one declared schema for both backends,
  with the plans (and the partial-index predicates) exactly as before. Chosen over naming the
  tables through a function of the setting, which would make every statement a function of it.

Our own Alembic version table, ``schedule_version``, lives in the namespace too
(``alma.schedule_version``; ``alma_schedule_version`` on SQLite), so a fleet's ``alembic_version``
is never read or written.
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
        return self.dialect == "postgresql"

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
