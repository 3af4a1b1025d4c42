"""Column types shared by PostgreSQL and SQLite: aware-UTC datetimes and JSON.
docs/architecture.md, section "The modules, in detail" (stores/sql/types.py).
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
