"""What a runner returns (:class:`RunResult`) and what every guarded transition answers (:class:`ClaimResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alma_schedule.model.data import Data
from alma_schedule.model.routine import Routine
from alma_schedule.model.run import RunRecord

__all__ = ["ClaimResult", "RunResult"]


@dataclass(frozen=True, slots=True)
class RunResult(Data):
    """What a runner returns. Only the engine writes the terminal state it implies.

    ``outcome`` is ``completed``, ``failed``, ``refused`` or ``submitted`` (``submitted`` only
    acknowledges what the handle already wrote). The engine may also finish ``timed_out`` and
    ``skipped`` itself. ``cost_micros`` is integer micro-USD; ``error_class`` is the exception
    class name of a failure, kept apart from the closed ``reason``.
    """

    outcome: str
    reason: str | None = None
    cost_micros: int | None = None
    error_class: str | None = None

    @classmethod
    def completed(cls, reason: str = "ok", cost_micros: int | None = None) -> RunResult:
        return cls("completed", reason, cost_micros)

    @classmethod
    def failed(cls, reason: str, cost_micros: int | None = None, error_class: str | None = None) -> RunResult:
        return cls("failed", reason, cost_micros, error_class)

    @classmethod
    def refused(cls, reason: str) -> RunResult:
        return cls("refused", reason, 0)

    @classmethod
    def submitted(cls) -> RunResult:
        return cls("submitted", None, None)

    @classmethod
    def timed_out(cls, reason: str = "deadline_passed", cost_micros: int | None = None) -> RunResult:
        return cls("timed_out", reason, cost_micros)


@dataclass(frozen=True, slots=True)
class ClaimResult(Data):
    """The answer of every guarded transition: a loser gets the winner's record, never an exception.

    ``reason`` is one of ``won``, ``duplicate`` (the edge was already taken), ``overlap``,
    ``superseded``, ``deleted``, ``disabled``, ``paused``, ``not_found``, ``expired`` (a ``start``
    at or past the run's ``expires_at``: nothing written).
    ``released``: the routine's buffered fire that this write's transaction moved to ``claimed``
    (it ended the active run); the caller sends it after the commit (a tick re-sends it otherwise).
    ``routine``: set by a WON ``start`` only: the routine row its CAS joined (what the runner needs,
    with no read of its own); never in :meth:`to_dict`.
    """

    won: bool
    record: RunRecord | None
    reason: str
    released: RunRecord | None = None
    routine: Routine | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values; ``released`` only when a buffered fire was released (0.1.0's shape otherwise)."""
        out = Data.to_dict(self)
        del out["routine"]
        if self.released is None:
            del out["released"]
        return out
