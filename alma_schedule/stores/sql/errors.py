"""The ONE boundary where driver errors become ours (``raise ... from exc``).
docs/architecture.md, section "The modules, in detail" (stores/sql/errors.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy.exc as sa_exc
from sqlalchemy.engine import URL, make_url

from alma_schedule.errors import (
    AlmaScheduleError,
    SchemaMismatch,
    StoreConflict,
    StoreError,
    StoreUnavailable,
)

# SQLSTATE classes / codes (PostgreSQL) that map to one of ours.
_PG_UNAVAILABLE_CLASSES = ("08", "57", "53")  # connection exception, operator intervention, resources
_PG_CONFLICT_CLASSES = ("23", "40")  # integrity constraint violation, transaction rollback
_PG_CONFLICT_CODES = ("55P03",)  # lock_not_available
_PG_SCHEMA_CODES = ("42P01", "42703", "3F000")  # undefined table / column / schema

_SQLITE_SCHEMA = ("no such table", "no such column", "has no column named")
_SQLITE_UNAVAILABLE = ("database is locked", "unable to open database", "disk i/o error", "database is busy")


def safe_url(url: str | URL) -> str:
    """The URL as text with its password hidden (for messages and logs)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL: say nothing that could be a secret
        return "<unparsable database URL>"


def _first_line(exc: BaseException, url: str | URL) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    try:
        password = make_url(url).password
    except Exception:
        password = None
    if password:
        line = line.replace(str(password), "***")
    return line[:300]


def classify(exc: BaseException) -> type[StoreError]:
    """Which of our errors a driver / SQLAlchemy error maps to."""
    if isinstance(exc, sa_exc.TimeoutError):  # the pool had no connection to give
        return StoreUnavailable
    orig = getattr(exc, "orig", None)
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return StoreUnavailable
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate:
        if sqlstate in _PG_SCHEMA_CODES:
            return SchemaMismatch
        if sqlstate[:2] in _PG_UNAVAILABLE_CLASSES:
            return StoreUnavailable
        if sqlstate[:2] in _PG_CONFLICT_CLASSES or sqlstate in _PG_CONFLICT_CODES:
            return StoreConflict
    message = str(orig if orig is not None else exc).lower()
    if isinstance(exc, sa_exc.IntegrityError):
        return StoreConflict
    if any(m in message for m in _SQLITE_SCHEMA):
        return SchemaMismatch
    if isinstance(exc, sa_exc.InterfaceError):
        return StoreUnavailable
    if isinstance(exc, sa_exc.OperationalError):
        from_sqlite = "sqlite" in type(orig).__module__
        if from_sqlite and not any(m in message for m in _SQLITE_UNAVAILABLE):
            return StoreError  # e.g. a syntax error: a bug of ours, not an outage
        return StoreUnavailable  # psycopg's connection failures carry no SQLSTATE
    return StoreError


def translate(exc: BaseException, url: str | URL) -> AlmaScheduleError:
    """Our error for ``exc`` (the caller raises it ``from exc``)."""
    if isinstance(exc, sa_exc.StatementError) and isinstance(exc.orig, AlmaScheduleError):
        return exc.orig  # raised by one of our bind processors (e.g. a naive datetime)
    kind = classify(exc)
    where = safe_url(url)
    line = _first_line(getattr(exc, "orig", None) or exc, url)
    if kind is SchemaMismatch:
        return SchemaMismatch(f"store {where} is not migrated ({line}): run `alma-schedule migrate`")
    if kind is StoreUnavailable:
        return StoreUnavailable(f"store {where} is unavailable: {line}")
    if kind is StoreConflict:
        return StoreConflict(f"store {where} refused a write: {line}")
    return StoreError(f"store {where} failed: {line}")


@contextmanager
def mapped_errors(url: str | URL) -> Iterator[None]:
    """Run a block, turning every SQLAlchemy / driver error into one of ours, ``from`` the original."""
    try:
        yield
    except (sa_exc.SQLAlchemyError, OSError) as exc:
        if isinstance(exc, OSError):
            raise StoreUnavailable(f"store {safe_url(url)} is unavailable: {_first_line(exc, url)}") from exc
        raise translate(exc, url) from exc
