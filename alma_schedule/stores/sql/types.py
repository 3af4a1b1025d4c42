"""Column types shared by PostgreSQL and SQLite: aware-UTC datetimes and JSON.

:class:`UtcDateTime` is ``timestamptz`` on PostgreSQL and a fixed-width UTC ``DATETIME`` text on
SQLite (which sorts and compares correctly as text). Values in must be aware (a naive datetime is
:class:`InvalidInput`: the store never guesses a zone); values out are always aware UTC.

:data:`Json` is ``jsonb`` on PostgreSQL and JSON text on SQLite (values are validated before any
statement by :mod:`alma_schedule.stores.validation`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

from alma_schedule.errors import InvalidInput


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """Aware UTC in and out, on every dialect."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(sa.DateTime(timezone=False))
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise InvalidInput(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is not UTC:
            if value.tzinfo is None or value.utcoffset() is None:
                raise InvalidInput(f"datetime {value.isoformat()} is naive: the store needs aware UTC")
            value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is UTC:
            return value
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


#: JSON on every dialect (``jsonb`` on PostgreSQL).
Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
