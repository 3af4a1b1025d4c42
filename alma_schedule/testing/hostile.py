"""Hostile generators (hypothesis) and the one rule they check: :func:`attempt`.
docs/architecture.md, section "The modules, in detail" (testing/hostile.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from alma_schedule.errors import AlmaScheduleError
from alma_schedule.stores.base import Store
from alma_schedule.testing.dump import dump_store

__all__ = [
    "HOSTILE",
    "anything",
    "attempt",
    "instants",
    "json_values",
    "numbers",
    "or_hostile",
    "spans",
    "texts",
]

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "20"))

#: The suite's settings: derandomized (the same examples on every run), no deadline (PostgreSQL on a
#: busy machine), no example database, every health check off (the stores are fixtures).
HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

SPECIAL_TEXTS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\u0661\u0662",  # Arabic-Indic 12
    "\uff11\uff12",  # full-width 12
    "\u0663m",
    "\u0661\u0662:\u0660\u0660",
    "line\nbreak",
    "\t\r\x1b[31m",
    "o'brien",
    "x'; DROP TABLE runs; --",
    "%_\\*?[]",
    "${jndi:x}",
    "../../etc/passwd",
    "\u202egnp.exe",
    "x" * 10_000,
    "9" * 5000,
    "1e300000",
    "NaN",
    "-Infinity",
    "running",
    "failed",
    "reconciled",
    "manual:01J0000000000000000000000",
]

ZONES = [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12)), timezone(timedelta(seconds=1))]


def texts() -> st.SearchStrategy[str]:
    everything = st.characters(codec=None, exclude_categories=())  # surrogates included
    return st.one_of(st.sampled_from(SPECIAL_TEXTS), st.text(everything, max_size=40))


def numbers() -> st.SearchStrategy[Any]:
    special = [float("nan"), float("inf"), float("-inf"), -0.0, 10**400, -(10**400), 2**63, 2**31, -1, 0, 1e269]
    return st.one_of(st.sampled_from(special), st.integers(), st.floats(), st.booleans(), st.integers(-(2**70), 2**70))


def instants() -> st.SearchStrategy[Any]:
    edges = [
        datetime.min,
        datetime.max,
        datetime.min.replace(tzinfo=UTC),
        datetime.max.replace(tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=ZONES[1]),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=ZONES[2]),
        datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(9000, 1, 1, tzinfo=UTC),
        datetime(2026, 3, 1, 12, 0),  # naive
    ]
    return st.one_of(st.sampled_from(edges), st.datetimes(), st.datetimes(timezones=st.sampled_from(ZONES)))


def spans() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from([timedelta.max, timedelta.min, timedelta(0), -timedelta(seconds=1)]), st.timedeltas()
    )


def _deep(depth: int, kind: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == 0 else {"k": value}
    return value


def json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), numbers(), texts())
    nested = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts(), inner, max_size=3),
        max_leaves=8,
    )
    not_json = st.sampled_from([{1, 2}, b"bytes", object(), (1, 2), {1: "int key"}, {None: 1}, {"x": {1}}])
    deep = st.builds(_deep, st.sampled_from([33, 65, 1000, 20_000]), st.integers(0, 1))
    return st.one_of(nested, not_json, deep, st.dictionaries(texts(), nested, max_size=3))


def anything() -> st.SearchStrategy[Any]:
    """Any hostile value: text, numbers, instants, spans, JSON and not-JSON, wrong types."""
    return st.one_of(texts(), numbers(), instants(), spans(), json_values(), st.none())


def or_hostile(*valid: Any) -> st.SearchStrategy[Any]:
    """One of the ``valid`` values (so accepted paths are exercised too) or :func:`anything`."""
    return st.one_of(st.sampled_from(valid), anything()) if valid else anything()


def attempt(store: Store, call: Callable[[], Any]) -> bool:
    """Run ``call``: True if accepted; False if refused with an ``alma_schedule.errors`` type, after
    checking the store is unchanged. Any other exception propagates (and fails the test)."""
    before = dump_store(store)
    try:
        call()
    except AlmaScheduleError:
        after = dump_store(store)
        assert after == before, "a refused call changed the store"
        return False
    return True
