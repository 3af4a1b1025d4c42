"""The three doors: a runner's handle on its run, a runner, and a dispatcher; and a runner's
optional abilities (:class:`Collects`, :class:`TellsLate`, :class:`HasRevisionInputs`), which the
engine checks with ``isinstance``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from alma_schedule.model.keys import RunKey
from alma_schedule.model.money import Ceiling, ReserveResult
from alma_schedule.model.results import ClaimResult, RunResult
from alma_schedule.model.routine import Routine
from alma_schedule.model.run import RunRecord

__all__ = ["Collects", "Dispatcher", "HasRevisionInputs", "RoutineRunner", "RunHandle", "Runs", "TellsLate"]


@runtime_checkable
class RunHandle(Protocol):
    """A runner's only door to its run row. The engine has already won ``claimed -> running``.

    Runners never claim and never write terminal states: they return a :class:`RunResult`.
    """

    @property
    def key(self) -> RunKey: ...

    @property
    def now(self) -> datetime: ...

    def result(self) -> RunRecord:
        """Re-read the run row (before any egress: an erasure or a ``record`` wins)."""
        ...

    def submit(
        self,
        batch_id: str | None,
        deadline: datetime,
        *,
        target_task_id: str | None = None,
        next_poll_at: datetime | None = None,
    ) -> ClaimResult:
        """``running -> submitted`` with the batch id (or target task id) and a mandatory deadline."""
        ...

    def begin_collecting(self) -> bool:
        """The ``submitted -> collecting`` CAS: only its winner may deliver."""
        ...

    def annotate(self, **values: Any) -> RunRecord:
        """Write session, turn, caps crossed, delivery hash, result text, cost repair. Never the state."""
        ...

    def reserve(self, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveResult:
        """Reserve a hard per-run bound against every ceiling, atomically (all or nothing)."""
        ...

    @property
    def config_changed(self) -> bool:
        """True when the run was claimed under another ``config_revision`` than the routine's current one."""
        ...

    def last_delivery_hash(self) -> str | None:
        """The delivery hash of the routine's last ``completed(delivered)`` run (text suppression)."""
        ...


@runtime_checkable
class Runs(Protocol):
    """What makes an object a runner rather than a resolver: a ``run`` method."""

    def run(self, routine: Routine, handle: RunHandle) -> RunResult: ...


@runtime_checkable
class RoutineRunner(Protocol):
    """Runs routines of the kinds it serves. ``collect`` only for kinds that submit background work."""

    def validate(self, routine: Routine) -> None:
        """Raise (any exception; its message becomes the refusal reason) to refuse a routine."""
        ...

    def run(self, routine: Routine, handle: RunHandle) -> RunResult: ...


@runtime_checkable
class Collects(Protocol):
    """A runner whose kinds submit background work: polls it (``submitted`` until it ends)."""

    def collect(self, routine: Routine, handle: RunHandle) -> RunResult: ...


@runtime_checkable
class TellsLate(Protocol):
    """A runner that can say, for the log line, what its target's state is as a run times out."""

    def late_result(self, record: RunRecord) -> str: ...


@runtime_checkable
class HasRevisionInputs(Protocol):
    """A runner whose runs depend on more than the definition: those inputs enter ``config_revision``."""

    def config_revision_inputs(self, routine: Routine) -> Any: ...


@runtime_checkable
class Dispatcher(Protocol):
    """How claimed fires and polls leave the tick (after its commit), and how deep the run queue is."""

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        """Send one run message per record, expiring at ``record.expires_at``."""
        ...

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        """Send one collect message per submitted record (key = ``collect_run_id``)."""
        ...

    def run_queue_depth(self) -> int | None:
        """Messages waiting in the run queue, or None when unknown."""
        ...
