"""Shared parts of the engine tests (``engine_support``): a simulated clock, a scripted runner,
recording dispatchers.

Instants are literals; the engine's only clock is ``Settings(clock=SettableTime)``. The runner is a real
:class:`RoutineRunner` whose behaviour each routine's definition chooses (``behave``), so tests
exercise the engine through its public API and the store protocol, never by patching it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from alma_schedule.model import Routine, RoutineSpec, RunHandle, RunKey, RunRecord, RunResult, Scope

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # a Monday
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
SCOPE = Scope("org-a", "user-1")
OTHER = Scope("org-b", "user-1")


#: Run a test on every backend: the in-memory reference, SQLite and PostgreSQL.
every_store = pytest.mark.parametrize(
    "store", ["memory", "sqlite", pytest.param("pg", marks=pytest.mark.postgres)], indirect=True
)


@dataclass
class ScriptRunner:
    """A runner whose definition says what to do: ``{"behave": "ok" | "fail" | "raise" | "submit"}``.

    ``submit`` jobs complete on the collect that sees ``poll_attempts >= polls`` (default 1),
    through ``begin_collecting`` (only its winner delivers). ``refuse`` in the definition makes
    ``validate`` raise with that text.
    """

    runs: list[tuple[RunKey, datetime]] = field(default_factory=list)
    collects: list[tuple[RunKey, datetime]] = field(default_factory=list)
    deliveries: list[RunKey] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_run: Callable[[Routine, RunHandle], None] | None = None

    def validate(self, routine: Routine) -> None:
        refuse = routine.definition.get("refuse")
        if refuse:
            raise ValueError(str(refuse))

    def config_revision_inputs(self, routine: Routine) -> dict[str, Any]:
        return dict(self.inputs)

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        with self.lock:
            self.runs.append((handle.key, handle.now))
        if self.on_run is not None:
            self.on_run(routine, handle)
        behave = routine.definition.get("behave", "ok")
        if behave == "ok":
            return RunResult.completed("ok", cost_micros=routine.definition.get("cost", 0))
        if behave == "fail":
            return RunResult.failed("provider_error")
        if behave == "raise":
            raise ZeroDivisionError("secret provider text 42")
        if behave == "submit":
            deadline = handle.now + timedelta(seconds=routine.definition.get("deadline_s", 3600))
            handle.submit(f"batch-{handle.key.run_id}", deadline)
            return RunResult.submitted()
        if behave == "lie":
            return RunResult.submitted()
        if behave == "garbage":
            return "done"  # type: ignore[return-value]
        raise AssertionError(f"unknown behave {behave!r}")

    def collect(self, routine: Routine, handle: RunHandle) -> RunResult:
        with self.lock:
            self.collects.append((handle.key, handle.now))
        record = handle.result()
        if record.poll_attempts < routine.definition.get("polls", 1):
            return RunResult.submitted()
        if handle.config_changed and not routine.definition.get("ignore_revision"):
            return RunResult.failed("config_revision_changed", cost_micros=5)
        if not handle.begin_collecting():
            return RunResult.submitted()
        with self.lock:
            self.deliveries.append(handle.key)
        return RunResult.completed("delivered", cost_micros=7)

    def ran(self, routine_id: str | None = None) -> list[str]:
        return [k.run_id for k, _ in self.runs if routine_id is None or k.routine_id == routine_id]


class RecordingDispatcher:
    """Keeps what the tick sends (nothing runs): for tests that drive execute/collect by hand."""

    #: It only records (nothing runs): a PostgreSQL tick starts its end before its last sends
    #: (alma_schedule/engine/outbox.py), so every engine test on PostgreSQL takes that path.
    sends_only = True

    def __init__(self, depth: int | None = 0) -> None:
        self.runs: list[RunRecord] = []
        self.collects: list[RunRecord] = []
        self.depth = depth
        self.depth_asked = 0
        self.fail = False

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        if self.fail:
            raise ConnectionError("broker down")
        self.runs.extend(runs)

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        if self.fail:
            raise ConnectionError("broker down")
        self.collects.extend(runs)

    def run_queue_depth(self) -> int | None:
        self.depth_asked += 1
        return self.depth

    def run_keys(self) -> list[str]:
        return [r.run_id for r in self.runs]


def spec(
    routine_id: str = "r1",
    schedule: dict[str, Any] | None = None,
    *,
    scope: Scope = SCOPE,
    kind: str = "script",
    **definition: Any,
) -> RoutineSpec:
    return RoutineSpec(
        scope.org,
        scope.uid,
        routine_id,
        kind,
        schedule if schedule is not None else {"cron": "0 9 * * *"},
        definition,
    )
