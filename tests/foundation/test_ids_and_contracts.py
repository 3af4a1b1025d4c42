"""Ids, ULIDs, the governed key, and the contracts' JSON shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import alma_schedule
from alma_schedule.errors import AlmaScheduleError, InvalidInput
from alma_schedule.model import (
    EDGES,
    NON_TERMINAL,
    TERMINAL,
    WAITING,
    RunKey,
    Scope,
    TickReport,
    check_id,
    governed_key,
    manual_run_id,
    new_ulid,
)


def test_ulids_sort_by_time_and_are_unique() -> None:
    a, b = new_ulid(1_000), new_ulid(2_000)
    assert len(a) == 26 and a < b
    assert len({new_ulid(5) for _ in range(1000)}) == 1000
    assert manual_run_id().startswith("manual:")


@pytest.mark.parametrize("bad", ["", "x" * 201, "a\x00b", "tab\there", "\udcff", " padded"])
def test_bad_ids_are_refused_by_name(bad: str) -> None:
    with pytest.raises(InvalidInput, match="routine_id"):
        check_id("routine_id", bad)


def test_quotes_and_sql_metacharacters_are_valid_ids() -> None:
    assert check_id("routine_id", "Robert'); DROP TABLE runs;--") == "Robert'); DROP TABLE runs;--"
    with pytest.raises(InvalidInput, match="uid must not contain '/'"):
        Scope.parse("a/b/c")
    assert Scope.parse("acme/alice") == Scope("acme", "alice")


def test_governed_key_is_stable_and_unambiguous() -> None:
    assert governed_key(Scope("a", "b"), "c", "d") == governed_key(Scope("a", "b"), "c", "d")
    assert governed_key(Scope("a", "bc"), "d", "e") != governed_key(Scope("ab", "c"), "d", "e")


def test_state_graph_is_acyclic_and_terminal_states_are_sinks() -> None:
    for target, sources in EDGES.items():
        assert not (sources & TERMINAL), target  # nothing leaves a terminal state
    assert NON_TERMINAL | WAITING | TERMINAL == set(EDGES) | {"buffered"}
    assert not (WAITING & (NON_TERMINAL | TERMINAL))  # buffered: non-terminal, outside the open-run set


def test_tick_report_is_small_json() -> None:
    key = RunKey("acme", "alice", "r1", "2026-01-01T00:00:00Z")
    report = TickReport(at=datetime(2026, 1, 1, tzinfo=UTC), claimed=(key,) * 50)
    d = json.loads(json.dumps(report.to_dict()))
    assert d["claimed"] == 50 and len(d["ids"]["claimed"]) == 5


def test_import_has_no_celery_and_one_error_root() -> None:
    import subprocess
    import sys

    code = "import sys, alma_schedule; alma_schedule.Scheduler; print('celery' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert issubclass(alma_schedule.InvalidSchedule, AlmaScheduleError)
    assert issubclass(alma_schedule.InvalidSchedule, ValueError)


def test_every_public_name_resolves_without_importing_celery() -> None:
    import subprocess
    import sys

    code = (
        "import sys, alma_schedule\n"
        "missing = [n for n in alma_schedule.__all__ if getattr(alma_schedule, n, None) is None]\n"
        "print(missing, 'celery' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] False"
