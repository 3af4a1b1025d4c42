"""The PostgreSQL databases of the tests: an empty one, or a clone of the run's migrated template.

A migrated database is a CLONE of a template migrated once per run (``CREATE DATABASE ... TEMPLATE``):
the template's name carries a hash of the migrations and the declared schema, it is made under an
advisory lock (parallel workers make it once), takes no connections, and the run's last process
drops it (tests/conftest.py). PostgreSQL: ALMA_TEST_PG_ADMIN (default 127.0.0.1:5432, user postgres).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_ADMIN = os.environ.get("ALMA_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_admin_exec(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


def make_pg_database() -> tuple[str, str]:
    """Create a fresh, empty database; returns (name, SQLAlchemy URL)."""
    name = f"alma_test_{uuid.uuid4().hex[:12]}"
    _pg_admin_exec(f'CREATE DATABASE "{name}"')
    return name, _sa_url(name)


def drop_pg_database(name: str) -> None:
    _pg_admin_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _template_name() -> str:
    """The template's name: a hash of every migration and of the declared schema (a change makes a new one)."""
    root = Path(__file__).resolve().parent.parent / "alma_schedule" / "stores" / "sql"
    digest = hashlib.sha256()
    for path in sorted([*(root / "migrations").rglob("*.py"), root / "schema.py"]):
        digest.update(path.read_bytes())
    return f"alma_tpl_{digest.hexdigest()[:16]}"


def _sa_url(name: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1) + f"/{name}"


def pg_template() -> str:
    """The migrated template database of this run (made once, under an advisory lock); its name."""
    import psycopg

    name = _template_name()
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(774411)")
        try:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if found is None:
                from alma_schedule.stores import migrate_store

                building = f"{name}_building"
                conn.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{building}"')
                migrate_store(_sa_url(building))
                conn.execute(f'ALTER DATABASE "{building}" WITH ALLOW_CONNECTIONS false')
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (building,))
                conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(774411)")
    return name


def drop_pg_templates() -> None:
    """Drop the templates (the run's last process: the xdist controller, or the only process)."""
    import psycopg

    try:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'alma_tpl_%'")]
            for name in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:  # no server (a unit run): nothing was made
        pass


@contextmanager
def migrated_pg_database() -> Iterator[str]:
    """A new PostgreSQL database at the migrations' head (a clone of the template), dropped afterwards."""
    import psycopg

    name = f"alma_test_{uuid.uuid4().hex[:12]}"
    for attempt in range(3):  # another run's last process may drop the template between the two statements
        template = pg_template()
        try:
            _pg_admin_exec(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            break
        except (psycopg.errors.InvalidCatalogName, psycopg.errors.ObjectInUse):
            if attempt == 2:
                raise
    # Test databases only: commits need not wait for the WAL flush (crash durability is not what
    # these tests examine; atomicity and isolation are unaffected). The store never sets this.
    _pg_admin_exec(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    try:
        yield _sa_url(name)
    finally:
        drop_pg_database(name)
