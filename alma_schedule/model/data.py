"""The data mixin every shape of :mod:`alma_schedule.model` shares: ``to_dict()`` gives JSON-ready values."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import fields
from datetime import date, datetime, timedelta
from typing import Any

__all__ = ["Data", "plain"]


def plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [plain(v) for v in value]
    return value


class Data:
    """Mixin: ``to_dict()`` gives JSON-ready values (ISO datetimes, plain lists)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]
