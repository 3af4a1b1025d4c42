"""Input checks every store backend applies before it writes anything (shared by memory and SQL).
docs/architecture.md, section "The modules, in detail" (stores/validation.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import EDGES, NON_TERMINAL, REASONS, RoutineKey, Scope, aware_utc, check_id, check_scope
from alma_schedule.model.time import MAX_INSTANT, MIN_INSTANT
from alma_schedule.policies.missed import CAP

MAX_JSON_DEPTH = 64
#: The largest page a read may ask for (a limit beyond it is refused, never sent to a driver).
MAX_LIMIT = 2**31 - 1

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_LIMIT",
    "check_from_states",
    "check_id",
    "check_json",
    "check_limit",
    "check_micros",
    "check_missed",
    "check_reason",
    "check_routine_key",
    "check_text",
    "check_utc",
    "require_utc",
]


def check_routine_key(scope: Scope, routine_id: str) -> tuple[str, str, str]:
    """Validate a scope and routine id (by building their :class:`RoutineKey`); returns the
    ``(org, uid, routine_id)`` tuple. A row's fields are checked this way before it is written."""
    check_scope(scope)
    key = RoutineKey(scope.org, scope.uid, routine_id)
    return (key.org, key.uid, key.routine_id)


def check_text(name: str, value: object, *, optional: bool = True) -> str | None:
    """Free text: a str that encodes as UTF-8 and holds no NUL (None allowed when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name} is not valid UTF-8 text") from None
    if "\x00" in value:
        raise InvalidInput(f"{name} contains a NUL character")
    return value


def check_utc(name: str, value: object, *, optional: bool = False) -> datetime | None:
    """An aware datetime in the supported range, returned in UTC (:func:`aware_utc`). Naive
    datetimes are refused (never guessed)."""
    if value is None and optional:
        return None
    if isinstance(value, datetime) and value.tzinfo is UTC and MIN_INSTANT <= value < MAX_INSTANT:
        return value  # the common case, already checked
    return aware_utc(name, value)


def require_utc(name: str, value: object) -> datetime:
    """:func:`check_utc` for a mandatory value."""
    out = check_utc(name, value)
    if out is None:  # pragma: no cover - check_utc refuses None when not optional
        raise InvalidInput(f"{name} is required")
    return out


def check_micros(name: str, value: object) -> int:
    """Integer micro-USD, >= 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer amount of micro-USD, not {type(value).__name__}")
    if value < 0:
        raise InvalidInput(f"{name} must not be negative")
    return value


def check_missed(value: object) -> int:
    """A ``Fire``'s ``fires_missed``: an ``int`` from 0 to :data:`alma_schedule.policies.missed.CAP`."""
    if type(value) is int and 0 <= value <= CAP:  # the usual case
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"fires_missed must be an integer, not {type(value).__name__}")
    raise InvalidInput(f"fires_missed must be from 0 to {CAP}, not {value}")


def check_collided(value: object, fire_at: datetime) -> tuple[datetime, ...]:
    """A ``Fire``'s ``collided``: a tuple of aware UTC instants, each at or before its ``fire_at``,
    at most :data:`alma_schedule.core.calendar_fires.COLLIDED_LIMIT` of them."""
    from alma_schedule.core.calendar_fires import COLLIDED_LIMIT

    if not isinstance(value, tuple):
        raise InvalidInput(f"collided must be a tuple of instants, not {type(value).__name__}")
    if len(value) > COLLIDED_LIMIT:
        raise InvalidInput(f"collided holds at most {COLLIDED_LIMIT} instants, not {len(value)}")
    out = tuple(require_utc("collided", v) for v in value)
    if any(v > fire_at for v in out):
        raise InvalidInput("collided instants must be at or before fire_at")
    return out


def check_limit(name: str, value: object) -> int:
    """A page size: an ``int`` (never a bool or float) up to :data:`MAX_LIMIT`; a negative one reads
    nothing (returned as 0)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer, not {type(value).__name__}")
    if value > MAX_LIMIT:
        raise InvalidInput(f"{name} must be at most {MAX_LIMIT}")
    return max(value, 0)


def check_reason(name: str, value: object, *, optional: bool = True) -> str | None:
    """A closed reason code of :data:`alma_schedule.model.REASONS`."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or value not in REASONS:
        raise InvalidInput(f"{name} {value!r} is not a known reason code")
    return value


def check_from_states(outcome: str, from_states: Collection[str] | None) -> frozenset[str]:
    """The states ``finish(outcome)`` may leave: :data:`EDGES` of ``outcome``, narrowed to
    ``from_states`` when given (never widened). A bare str or an unknown / terminal state is refused."""
    allowed = EDGES[outcome] & NON_TERMINAL  # never a waiting (buffered) fire: it has no owner
    if from_states is None:
        return allowed
    if isinstance(from_states, str) or not isinstance(from_states, Collection):
        raise InvalidInput("from_states must be a collection of run states (not a single str)")
    states = frozenset(from_states)
    unknown = sorted(repr(s) for s in states if not isinstance(s, str) or s not in NON_TERMINAL)
    if unknown:
        raise InvalidInput(f"from_states holds states a run cannot be finished from: {', '.join(unknown)}")
    return allowed & states


def _walk(name: str, value: Any, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(f"{name} is nested deeper than {MAX_JSON_DEPTH} levels")
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{name} holds a non-finite number ({value!r}), which JSON cannot carry")
        return
    if isinstance(value, str):
        check_text(name, value, optional=False)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{name} has a non-text key {key!r}")
            check_text(f"{name} key", key, optional=False)
            _walk(name, item, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _walk(name, item, depth + 1)
        return
    raise InvalidInput(f"{name} holds a {type(value).__name__}, which is not JSON")


def check_json(name: str, value: object) -> str:
    """Validate a JSON object body (a mapping) and return its canonical text (sorted keys, UTF-8)."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{name} must be a JSON object (a mapping), not {type(value).__name__}")
    _walk(name, value, 1)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
