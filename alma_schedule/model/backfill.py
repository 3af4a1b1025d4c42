"""A backfill: an operator's range of past fires to run, one run row (origin ``backfill``) per fire.

docs/architecture.md, section "The modules, in detail" (model/backfill.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from alma_schedule.model.data import Data
from alma_schedule.model.keys import RoutineKey, Scope, trusted

__all__ = ["BACKFILL_ORIGIN", "Backfill", "BackfillStep"]

#: The ``origin`` of a backfill's run rows (beside ``schedule`` and ``manual``).
BACKFILL_ORIGIN = "backfill"


@dataclass(frozen=True, slots=True)
class Backfill(Data):
    """One routine's backfill range (the ``backfills`` row)."""

    org: str
    uid: str
    routine_id: str
    from_at: datetime
    to_at: datetime
    next_at: datetime | None
    max_fires: int
    cancelled_at: datetime | None = None
    created_at: datetime | None = None

    @property
    def key(self) -> RoutineKey:
        return trusted(RoutineKey, self.org, self.uid, self.routine_id)

    @property
    def scope(self) -> Scope:
        return trusted(Scope, self.org, self.uid)

    @property
    def pending(self) -> bool:
        """Not cancelled and not done: a tick may still claim a fire of it."""
        return self.cancelled_at is None and self.next_at is not None


@dataclass(frozen=True, slots=True)
class BackfillStep(Data):
    """The engine's plan for one routine's backfill at one tick: the next ``candidates``
    (``(run_id, fire_at)``, in fire order, all inside the range and its bounds), ``expires_at`` and
    ``resend_at`` of a claim, and ``exhausted`` (no fire of the range lies after the candidates).
    The store claims the first candidate with no run row, then moves ``next_at`` past it (NULL when
    it was the last one); with none free it moves ``next_at`` past them all."""

    candidates: tuple[tuple[str, datetime], ...]
    expires_at: datetime
    resend_at: datetime
    exhausted: bool
