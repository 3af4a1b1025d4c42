"""Column types shared by PostgreSQL and SQLite: aware-UTC datetimes and JSON.

:class:`UtcDateTime` is ``timestamptz`` on PostgreSQL and a fixed-width UTC ``DATETIME`` text on
SQLite (which sorts and compares correctly as text). Values in must be aware (a naive datetime is
:class:`InvalidInput`: the store never guesses a zone); values out are always aware UTC.

:data:`Json` is ``jsonb`` on PostgreSQL and JSON text on SQLite. :func:`check_json` validates a value
before any statement: JSON-serialisable, finite numbers, no NUL characters (PostgreSQL's ``jsonb``
cannot hold them) and valid UTF-8 text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
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
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInput(f"datetime {value.isoformat()} is naive: the store needs aware UTC")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


#: JSON on every dialect (``jsonb`` on PostgreSQL).
Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _plain(value: Any, where: str) -> Any:
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidInput(f"{where} contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(f"{where} is not valid UTF-8 text") from None
        return value
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where} holds a non-finite number")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidInput(f"{where} has a non-text key {k!r}")
            out[_plain(k, where)] = _plain(v, where)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    raise InvalidInput(f"{where} holds a {type(value).__name__}, which is not JSON")


def check_json(name: str, value: Any) -> Any:
    """Return a plain JSON copy of ``value`` (dicts and lists) or raise :class:`InvalidInput`."""
    plain = _plain(value, name)
    try:
        json.dumps(plain, allow_nan=False)
    except (TypeError, ValueError) as exc:  # pragma: no cover - _plain already refuses these
        raise InvalidInput(f"{name} is not JSON: {exc}") from None
    return plain
