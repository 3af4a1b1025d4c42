"""``migrate_store(url)``: bring a SQL store to this code's schema with Alembic.

The scripts live in the package (``migrations/``, one initial revision until the first release).
Idempotent: a store already at head is left alone. Safe when several processes migrate at once:

* PostgreSQL: a session-level ``pg_advisory_lock`` is held around the whole upgrade, and the
  upgrade itself is one transaction (transactional DDL): the second migrator waits, then finds the
  store at head and does nothing.
* SQLite: the upgrade runs in ONE ``BEGIN IMMEDIATE`` transaction (the engine's begin hook), which
  takes the database's write lock before Alembic reads the current revision.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.engine import make_engine, normalize_url
from alma_schedule.stores.sql.errors import mapped_errors

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

__all__ = ["MIGRATIONS", "alembic_config", "current_revision", "head_revision", "migrate_store"]


def alembic_config() -> Config:
    """An Alembic config pointing at the package's scripts (no ini file needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def migrate_store(url: str) -> str:
    """Upgrade the store at ``url`` to head (idempotent, concurrency-safe). Returns the revision.

    Raises :class:`~alma_schedule.errors.StoreUnavailable` (naming the URL without its password)
    when the database cannot be reached.
    """
    parsed = normalize_url(url)
    engine = make_engine(parsed, pool_size=1, max_overflow=0)
    postgres = engine.dialect.name == "postgresql"
    try:
        with mapped_errors(parsed), engine.connect() as conn:
            if postgres:
                conn.execute(q.advisory_lock())
                conn.commit()
            try:
                cfg = alembic_config()
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                conn.commit()
            finally:
                if postgres:
                    conn.rollback()
                    conn.execute(q.advisory_unlock())
                    conn.commit()
            return current_revision(conn) or ""
    finally:
        engine.dispose()


def current_revision(conn: object) -> str | None:
    """The revision a connection's database is at (None when never migrated)."""
    ctx = MigrationContext.configure(conn)  # type: ignore[arg-type]
    return ctx.get_current_revision()
