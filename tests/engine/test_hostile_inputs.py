"""Issue 14, defect 8: the inputs an outside attack found raising untyped exceptions through the
public API, each now refused with an ``alma_schedule.errors`` type where it is checked, naming it,
on every store, and the store unchanged (the property suite in ``tests/hostile`` generalises it)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from engine_support import SCOPE, T0, every_store, spec

from alma_schedule.engine import Scheduler
from alma_schedule.engine.revision import canonical_json
from alma_schedule.errors import InvalidInput, RegistrationRefused
from alma_schedule.testing.dump import dump_store

Call = Callable[[Scheduler], Any]


def deep(n: int) -> Any:
    value: Any = 1
    for _ in range(n):
        value = {"a": value}
    return value


def _deprecated_list(**kwargs: Any) -> Call:
    def call(s: Scheduler) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return s.list(SCOPE, **kwargs)

    return call


CASES: dict[str, tuple[Call, str]] = {
    "tick_now_year_1": (lambda s: s.tick(now=datetime(1, 1, 1, tzinfo=UTC)), "now 0001-01-01"),
    "plan_now_9999": (lambda s: s.plan(now=datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)), "now 9999"),
    "register_now_year_1": (lambda s: s.register(spec("r9"), now=datetime(1, 1, 1, tzinfo=UTC)), "outside"),
    "trigger_now_offset_overflow": (
        lambda s: s.trigger(SCOPE, "r1", now=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))),
        "outside",
    ),
    "decide_now_9999": (lambda s: s.decide(s.get(SCOPE, "r1"), now=datetime.max.replace(tzinfo=UTC)), "outside"),
    "list_limit_text": (_deprecated_list(limit="x"), "limit must be an integer"),
    "routines_limit_float": (lambda s: s.routines(SCOPE, limit=1e269), "limit must be an integer"),  # type: ignore[arg-type]
    "routines_limit_nan": (lambda s: s.routines(SCOPE, limit=float("nan")), "limit"),  # type: ignore[arg-type]
    "routines_limit_huge": (lambda s: s.routines(SCOPE, limit=10**30), "at most"),
    "routines_after_list": (lambda s: s.routines(SCOPE, after=["x"]), "after must be text"),  # type: ignore[arg-type]
    "runs_state_list": (lambda s: s.runs(SCOPE, state=["running"]), "unknown run state"),  # type: ignore[arg-type]
    "runs_limit_text": (lambda s: s.runs(SCOPE, limit="10"), "limit"),  # type: ignore[arg-type]
    "runs_before_int": (lambda s: s.runs(SCOPE, before=5), "before must be"),  # type: ignore[arg-type]
    "runs_before_nul": (lambda s: s.runs(SCOPE, before=(T0, "a\x00b")), "before"),
    "record_reason_list": (lambda s: s.record(SCOPE, "r1", "x", "failed", ["a"]), "reason"),  # type: ignore[arg-type]
    "record_outcome_dict": (lambda s: s.record(SCOPE, "r1", "x", {}, "reconciled"), "outcome"),  # type: ignore[arg-type]
    "register_deep_definition": (lambda s: s.register(spec("r9", text=deep(10_000))), "nested deeper"),
}


@every_store
@pytest.mark.parametrize("case", list(CASES))
def test_hostile_input_is_a_typed_refusal_and_changes_nothing(make, case: str) -> None:
    sched = make()
    sched.register(spec("r1", {"every": 60}))
    call, named = CASES[case]
    before = dump_store(sched.store)
    with pytest.raises((InvalidInput, RegistrationRefused)) as info:
        call(sched)
    assert named in str(info.value) and "\n" not in str(info.value)
    assert dump_store(sched.store) == before


def test_canonical_json_refuses_deep_values_without_recursing() -> None:
    with pytest.raises(InvalidInput, match="nested deeper than 64"):
        canonical_json(deep(100_000))
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(InvalidInput):
        canonical_json(cycle)
    assert canonical_json(deep(64)).count("{") == 64  # the deepest value it encodes


@every_store
def test_stuck_and_blocked_take_any_span(make) -> None:
    store = make().store
    assert store.stuck(T0, timedelta(days=999_999_999)) == []
    assert store.blocked(T0, timedelta(days=999_999_999)) == []
    with pytest.raises(InvalidInput, match="older_than"):
        store.stuck(T0, -timedelta(seconds=1))
    with pytest.raises(InvalidInput, match="limit"):
        store.stuck(T0, timedelta(0), limit=2**40)
