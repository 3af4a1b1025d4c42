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

    docs/architecture.md, "The modules, in detail" (model/results.py, RunResult).
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

    docs/architecture.md, "The modules, in detail" (model/results.py, ClaimResult).
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
