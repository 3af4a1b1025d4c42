"""The tick's shapes: ``decide``'s answers, what one claim transaction did, the plan and the report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alma_schedule.model.data import Data
from alma_schedule.model.keys import RunKey
from alma_schedule.model.run import RunRecord

__all__ = [
    "ClaimBatch", "Decision", "Defer", "Deferral", "Erroring", "Fire", "NotDue", "PlannedFire", "PlannedRoutine",
    "Resends", "TickError", "TickPlan", "TickReport",
]


@dataclass(frozen=True, slots=True)
class Fire(Data):
    """``decide``'s answer for a due routine: claim this fire and move the index.

    ``missed=True`` records the fire ``skipped(missed)`` instead of claiming it (past
    ``max_catch_up``). ``resend_at`` is when the first re-send may happen. ``due_at`` is when the
    fire came due (``fire_at`` plus its jitter; None: ``fire_at``), stored on the run row.
    """

    run_id: str
    fire_at: datetime
    expires_at: datetime
    next_due_at: datetime | None
    resend_at: datetime | None = None
    missed: bool = False
    due_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class NotDue(Data):
    """``decide``'s answer when nothing is due after all (a stale index): just move it."""

    next_due_at: datetime | None


@dataclass(frozen=True, slots=True)
class Defer(Data):
    """``decide``'s answer for a routine that cannot be planned: back off until ``until``."""

    until: datetime
    error: str


Decision = Fire | NotDue | Defer


@dataclass(frozen=True, slots=True)
class Deferral(Data):
    """A routine deferred by one ``claim_due`` (one entry in the tick's ``errors``)."""

    org: str
    uid: str
    routine_id: str
    until: datetime
    error: str
    first: bool = True  # the first deferral of a streak (reported once, then backed off)


@dataclass(frozen=True, slots=True)
class Erroring(Data):
    """The routines that carry a planning error: a few of them, earliest next attempt
    (``Deferral.until``) first, and how many there are in all."""

    routines: tuple[Deferral, ...] = ()
    count: int = 0


@dataclass(frozen=True, slots=True)
class ClaimBatch(Data):
    """What one ``claim_due`` transaction did."""

    claimed: tuple[RunRecord, ...] = ()
    skipped: tuple[RunRecord, ...] = ()
    deferred: tuple[Deferral, ...] = ()


@dataclass(frozen=True, slots=True)
class Resends(Data):
    """What one ``take_resends`` did: rows to send again, rows expired to ``skipped(missed)``."""

    resend: tuple[RunRecord, ...] = ()
    expired: tuple[RunRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class PlannedFire(Data):
    org: str
    uid: str
    routine_id: str
    run_id: str
    fire_at: datetime
    action: str  # "claim" | "skip:missed" | "defer" | "not_due"
    why: str = ""
    due_at: datetime | None = None  # fire_at + its jitter (the instant the fire came due)


@dataclass(frozen=True, slots=True)
class PlannedRoutine(Data):
    org: str
    uid: str
    routine_id: str
    why: str


@dataclass(frozen=True, slots=True)
class TickPlan(Data):
    """What a tick at ``at`` would do; read-only. Poll entries carry ``collect_run_id``."""

    at: datetime
    due: tuple[PlannedFire, ...] = ()
    resends: tuple[RunKey, ...] = ()
    expiring: tuple[RunKey, ...] = ()
    polls: tuple[dict[str, str], ...] = ()
    skipped: tuple[PlannedRoutine, ...] = ()
    inactive: tuple[PlannedRoutine, ...] = ()
    blocked: tuple[RunKey, ...] = ()
    errors: tuple[TickError, ...] = ()
    erroring_count: int = 0
    next_wake_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TickError(Data):
    """One error of a tick: a routine that cannot be planned (``routine`` = its key, ``until`` =
    its next attempt), or a step of the tick (``<dispatcher>``, ``<maintenance>``)."""

    routine: str
    error: str
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class TickReport(Data):
    """The tick's small report. ``to_dict()`` is counts plus a few ids (Flower shows it as text)."""

    at: datetime
    claimed: tuple[RunKey, ...] = ()
    resent: tuple[RunKey, ...] = ()
    collect: tuple[RunKey, ...] = ()
    skipped: tuple[RunKey, ...] = ()
    blocked: tuple[RunKey, ...] = ()
    errors: tuple[TickError, ...] = ()
    expired: tuple[RunKey, ...] = ()
    sends_paused: bool = False
    erroring_count: int = 0
    next_wake_at: datetime | None = None

    SAMPLE = 5

    def to_dict(self) -> dict[str, Any]:  # type: ignore[override]
        n = self.SAMPLE
        return {
            "at": self.at.isoformat(),
            "claimed": len(self.claimed),
            "resent": len(self.resent),
            "collect": len(self.collect),
            "skipped": len(self.skipped) + len(self.expired),
            "blocked": len(self.blocked),
            "errors": len(self.errors),
            "erroring": self.erroring_count,
            "sends_paused": self.sends_paused,
            "next_wake_at": None if self.next_wake_at is None else self.next_wake_at.isoformat(),
            "ids": {
                "claimed": [str(k) for k in self.claimed[:n]],
                "skipped": [str(k) for k in (self.skipped + self.expired)[:n]],
                "blocked": [str(k) for k in self.blocked[:n]],
                "errors": [e.to_dict() for e in self.errors[:n]],
            },
        }
