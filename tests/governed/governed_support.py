"""Shared parts of the governed-runner tests: a settable clock, a recording sink, a killing handle,
and a harness over the REAL engine and a real store (memory, SQLite or PostgreSQL).

Fakes stand only for the things outside the system under test: the provider (the package's own
``ScriptedProvider``, scripted per test) and the sink (:class:`ListSink`). A "kill" is
:class:`Killed`, a ``BaseException`` the engine does not catch: it escapes ``execute`` exactly as a
process death would interrupt it, leaving in the store only what was persisted before that step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from alma_schedule.engine import create_schedule
from alma_schedule.engine.handle import money_day
from alma_schedule.model import (
    Ceiling,
    ClaimResult,
    ReserveResult,
    Routine,
    RoutineRunner,
    RoutineSpec,
    RunHandle,
    RunKey,
    RunRecord,
    RunResult,
    Scope,
)
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.governed.protocols import Delivery
from alma_schedule.settings import Settings

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
SCOPE = Scope("org-a", "user-1")
DAY = money_day(T0, "UTC")


class Killed(BaseException):
    """A simulated process death: not an ``Exception``, so nothing in the engine catches it."""


@dataclass
class ListSink:
    """Records every delivery attempt; ``fail`` makes the next attempts raise it."""

    deliveries: list[Delivery] = field(default_factory=list)
    attempts: int = 0
    fail: BaseException | None = None
    identity: str = "list"

    def deliver(self, delivery: Delivery) -> None:
        self.attempts += 1
        if self.fail is not None:
            raise self.fail
        self.deliveries.append(delivery)


class NoDispatch:
    """A dispatcher that sends nothing: tests drive ``execute`` / ``collect`` themselves."""

    def __init__(self) -> None:
        self.runs: list[RunRecord] = []
        self.collects: list[RunRecord] = []

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        self.runs.extend(runs)

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        self.collects.extend(runs)

    def run_queue_depth(self) -> int | None:
        return 0


class KillingHandle:
    """Wraps the engine's real handle; at the ``nth`` call of ``method`` runs ``action`` first
    (default: raise :class:`Killed` before the call reaches the store)."""

    def __init__(self, inner: RunHandle, method: str, nth: int, action: Callable[[], None] | None) -> None:
        self._inner = inner
        self._method = method
        self._nth = nth
        self._action = action
        self._count = 0

    def _step(self, name: str) -> None:
        if name != self._method:
            return
        self._count += 1
        if self._count == self._nth:
            if self._action is None:
                raise Killed(f"killed at {name} #{self._nth}")
            self._action()

    @property
    def key(self) -> RunKey:
        return self._inner.key

    @property
    def now(self) -> datetime:
        return self._inner.now

    @property
    def config_changed(self) -> bool:
        return self._inner.config_changed

    def result(self) -> RunRecord:
        self._step("result")
        return self._inner.result()

    def submit(self, batch_id: str | None, deadline: datetime, **kw: Any) -> ClaimResult:
        self._step("submit")
        return self._inner.submit(batch_id, deadline, **kw)

    def begin_collecting(self) -> bool:
        self._step("begin_collecting")
        return self._inner.begin_collecting()

    def annotate(self, **values: Any) -> RunRecord:
        self._step("annotate")
        return self._inner.annotate(**values)

    def reserve(self, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveResult:
        self._step("reserve")
        return self._inner.reserve(amount_micros, ceilings)

    def last_delivery_hash(self) -> str | None:
        self._step("last_delivery_hash")
        return self._inner.last_delivery_hash()


class Interrupting:
    """A runner wrapper that hands the real runner a :class:`KillingHandle` (once armed)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.arm: tuple[str, int, Callable[[], None] | None] | None = None
        self.handles: list[KillingHandle] = []

    def at(self, method: str, nth: int = 1, action: Callable[[], None] | None = None) -> None:
        self.arm = (method, nth, action)

    def _wrap(self, handle: RunHandle) -> RunHandle:
        if self.arm is None:
            return handle
        method, nth, action = self.arm
        self.arm = None
        wrapped = KillingHandle(handle, method, nth, action)
        self.handles.append(wrapped)
        return wrapped  # type: ignore[return-value]

    def validate(self, routine: Routine) -> None:
        self.runner.validate(routine)

    def config_revision_inputs(self, routine: Routine) -> Any:
        return self.runner.config_revision_inputs(routine)

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        result: RunResult = self.runner.run(routine, self._wrap(handle))
        return result

    def collect(self, routine: Routine, handle: RunHandle) -> RunResult:
        result: RunResult = self.runner.collect(routine, self._wrap(handle))
        return result


class Harness:
    """The real engine over a real store, with one runner (or a resolver) and a manual dispatcher."""

    def __init__(self, store: Any, runner: RoutineRunner | Any, clock: SettableTime, **settings: Any) -> None:
        self.store = store
        self.clock = clock
        self.dispatch = NoDispatch()
        self.settings = Settings(clock=clock, **settings)
        self.schedule = create_schedule(store=store, runner=runner, dispatcher=self.dispatch, settings=self.settings)

    def register(self, routine_id: str, kind: str = "turn", **definition: Any) -> Routine:
        spec = RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, kind, {"cron": "0 8 * * *"}, definition)
        return self.schedule.register(spec).routine

    def fire(self, routine_id: str) -> RunKey:
        """A manual fire, one second after the previous one (runs are ordered by their instant)."""
        self.clock.advance(timedelta(seconds=1))
        return self.schedule.trigger(SCOPE, routine_id).key

    def run(self, routine_id: str) -> RunRecord:
        return self.schedule.execute(self.fire(routine_id))

    def get(self, key: RunKey) -> RunRecord:
        rec = self.store.get(RunKey.of(key.scope, key.routine_id, key.run_id))
        assert rec is not None
        return rec

    def collect(self, key: RunKey) -> RunRecord:
        return self.schedule.collect(key)

    def spend(self, ceiling: str) -> int:
        return int(self.store.spend(ceiling, money_day(self.clock(), "UTC")))


def routine_ceiling(routine_id: str, scope: Scope = SCOPE) -> str:
    return Ceiling.routine_key(scope.org, scope.uid, routine_id)


ORG_CEILING = Ceiling.org_key(SCOPE.org)


def empty_tables(url: str) -> None:
    """Delete every row of every table of the store's schema (children first)."""
    from alma_schedule.stores.sql.engine import make_engine
    from alma_schedule.stores.sql.schema import metadata

    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for table in reversed(metadata.sorted_tables):
                conn.execute(table.delete())
    finally:
        engine.dispose()
