"""``migrate_store(url)``: bring a SQL store to this code's schema with Alembic, in its namespace.
docs/architecture.md, section "The modules, in detail" (stores/sql/migrate.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import event
from sqlalchemy.engine import Connection

from alma_schedule.errors import AdoptionRequired, SchemaMismatch, StoreError
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.engine import make_engine, normalize_url
from alma_schedule.stores.sql.errors import mapped_errors, safe_url
from alma_schedule.stores.sql.namespace import LEGACY_REVISION, LEGACY_TABLES, Namespace, postgres_rewrite
from alma_schedule.stores.sql.queries import adopt as qa

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
#: How long a migrator waits for another one holding the migration lock, and how often it looks (s).
LOCK_WAIT = 600.0
LOCK_POLL = 0.25

__all__ = ["MIGRATIONS", "Migration", "alembic_config", "current_revision", "head_revision", "migrate", "migrate_store"]


@dataclass(frozen=True, slots=True)
class Migration:
    """What :func:`migrate` did: the revision the store is at, and the tables adoption moved."""

    revision: str
    namespace: str
    adopted: tuple[str, ...] = ()


def alembic_config(space: Namespace | None = None) -> Config:
    """An Alembic config pointing at the package's scripts (no ini file needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if space is not None:
        cfg.attributes["namespace"] = space
    return cfg


def head_revision() -> str:
    """The ONE head of the scripts (several heads would be a fork of the schema: refused)."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise StoreError(f"the migrations have {len(heads)} heads ({', '.join(sorted(heads))}), not one")
    return heads[0]


def migrate_store(url: str, *, adopt: bool = False, schema: str | None = None) -> str:
    """Upgrade the store at ``url`` (namespace ``schema``, default ``alma``) to head (idempotent,
    concurrency-safe). Returns the revision.
    docs/architecture.md, section "The modules, in detail" (stores/sql/migrate.py).
    """
    return migrate(url, adopt=adopt, schema=schema).revision


def _take_lock(conn: Connection, where: str) -> None:
    """The migration lock, polled (see the module docstring); :class:`StoreError` after ``LOCK_WAIT``."""
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        taken = bool(conn.execute(q.advisory_lock()).scalar())
        conn.commit()
        if taken:
            return
        if time.monotonic() > deadline:
            raise StoreError(f"store {where}: another migration has held the migration lock for {LOCK_WAIT:g}s")
        time.sleep(LOCK_POLL)


def _translate_alembic_text(conn: Connection, quoted_schema: str) -> None:
    """Alembic's ALTER statements on this connection get the real schema too (:func:`postgres_rewrite`)."""

    def rewrite(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, _many: bool) -> tuple[str, Any]:
        return postgres_rewrite(statement, quoted_schema), params

    event.listen(conn, "before_cursor_execute", rewrite, retval=True)


def migrate(url: str, *, adopt: bool = False, schema: str | None = None) -> Migration:
    """:func:`migrate_store`, saying also which tables adoption moved (for the CLI)."""
    parsed = normalize_url(url)
    engine = make_engine(parsed, schema=schema, pool_size=1, max_overflow=0)
    space = Namespace.of(schema, engine.dialect.name)
    try:
        with mapped_errors(parsed), engine.connect() as conn:
            if space.postgres:
                _translate_alembic_text(conn, engine.dialect.identifier_preparer.quote_schema(space.name))
                _take_lock(conn, safe_url(parsed))
            try:
                adopted = _prepare(conn, space, adopt=adopt, where=safe_url(parsed))
                cfg = alembic_config(space)
                cfg.attributes["connection"] = conn
                try:
                    if adopted:
                        command.stamp(cfg, LEGACY_REVISION)
                    command.upgrade(cfg, "head")
                except CommandError as exc:
                    raise SchemaMismatch(
                        f"store {safe_url(parsed)} ({space.describe()}) cannot be migrated: "
                        f"{str(exc).splitlines()[0]} (written by a newer alma-schedule?)"
                    ) from None
                conn.commit()
            finally:
                conn.rollback()
                if space.postgres:
                    conn.execute(q.advisory_unlock())
                    conn.commit()
            return Migration(current_revision(conn, space) or "", space.name, adopted)
    finally:
        engine.dispose()


def _prepare(conn: Connection, space: Namespace, *, adopt: bool, where: str) -> tuple[str, ...]:
    """Open the migration's transaction: create the schema, find a 0.1.0 store and (``adopt``) move
    its tables. Returns the tables moved."""
    if space.postgres and not conn.execute(qa.schema_exists(space.name)).scalar():
        conn.execute(qa.create_schema(conn, space.name))
    if current_revision(conn, space) is not None:
        return ()  # ours already: a 0.1.0 store beside it (if any) is someone else's business
    legacy = legacy_tables(conn, space)
    if legacy is None:
        return ()
    source = legacy[0]
    if not adopt:
        raise adoption_required(space, where, source)
    if space.postgres and source == space.name:  # ALMA_DATABASE_SCHEMA names the default schema
        _forget_legacy_version(conn, source)
        return LEGACY_TABLES
    targets = [space.table(t) for t in LEGACY_TABLES]
    if space.postgres:
        clash = conn.execute(qa.schema_tables(space.name, LEGACY_TABLES)).scalars().all()
    else:
        clash = conn.execute(qa.file_tables(targets)).scalars().all()
    if clash:
        raise StoreError(
            f"store {where}: cannot adopt the 0.1.0 tables, {space.describe()} already holds {', '.join(sorted(clash))}"
        )
    for table in LEGACY_TABLES:
        _move(conn, space, table, source)
    _forget_legacy_version(conn, source)
    return LEGACY_TABLES


def legacy_tables(conn: Connection, space: Namespace) -> tuple[str | None] | None:
    """``(schema,)`` where alma-schedule 0.1.0's tables are (PostgreSQL: the current schema; SQLite:
    None, the file's main tables), or None when this database holds no 0.1.0 store (a fleet's own
    tables that happen to share our names are not one: their alembic_version is not ours)."""
    source = conn.execute(qa.current_schema()).scalar() if space.postgres else None
    wanted = (*LEGACY_TABLES, "alembic_version")
    found = set(conn.execute(qa.schema_tables(source, wanted) if space.postgres else qa.file_tables(wanted)).scalars())
    if not set(LEGACY_TABLES) <= found or "alembic_version" not in found:
        return None
    if LEGACY_REVISION not in conn.execute(qa.legacy_versions(source)).scalars().all():
        return None
    return (source,)


def adoption_required(space: Namespace, where: str, source: str | None) -> AdoptionRequired:
    """The one-line refusal of a 0.1.0 store: `migrate --adopt` moves its tables into ``space``."""
    here = f"schema {source!r}" if source else "the file's main tables"
    return AdoptionRequired(
        f"store {where} holds alma-schedule 0.1.0's tables ({', '.join(LEGACY_TABLES)}; alembic_version "
        f"{LEGACY_REVISION}) in {here}: stop workers and clocks, then run "
        f"`alma-schedule migrate --adopt` to move them into {space.describe()}"
    )


def _forget_legacy_version(conn: Connection, source: str | None) -> None:
    """Remove 0.1.0's row from ``alembic_version``; drop the table when nothing else is in it."""
    conn.execute(qa.forget_legacy_version(source, LEGACY_REVISION))
    if not conn.execute(qa.legacy_versions(source)).first():
        conn.execute(qa.drop_legacy_version_table(conn, source))


def _move(conn: Connection, space: Namespace, table: str, source: str | None) -> None:
    if space.postgres:
        conn.execute(qa.move_table(conn, table, source=source, target=space.name))
        return
    target = space.table(table)
    conn.execute(qa.rename_table(conn, table, target))
    for name, create_sql in conn.execute(qa.sqlite_indexes(target)).all():
        conn.execute(qa.drop_index(conn, name))
        conn.execute(qa.renamed_index(conn, create_sql, space.index(name)))


def current_revision(conn: object, space: Namespace | None = None) -> str | None:
    """The revision a connection's store is at, from our version table (None when never migrated)."""
    if space is None:
        space = Namespace.of(None, conn.dialect.name)  # type: ignore[attr-defined]
    ctx = MigrationContext.configure(
        conn,  # type: ignore[arg-type]
        opts={"version_table": space.version_table, "version_table_schema": space.version_table_schema},
    )
    return ctx.get_current_revision()
