"""The "did not run" alarm's shapes: an overdue fire (:class:`OverdueFire`) and the delivery state
of its alert (:class:`AlertState`).

docs/architecture.md, section "The modules, in detail" (model/overdue.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from alma_schedule.model.data import Data

__all__ = ["AlertState", "FireKey", "OverdueFire", "alert_key"]

#: A fire of a routine: ``(org, uid, routine_id, fire_at)``.
FireKey = tuple[str, str, str, datetime]


def alert_key(org: str, uid: str, routine_id: str, fire_at: datetime) -> str:
    """The alert's ``Idempotency-Key``: ``org/uid/routine_id/<fire instant, UTC, seconds>``."""
    instant = fire_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{org}/{uid}/{routine_id}/{instant}"


@dataclass(frozen=True, slots=True)
class OverdueFire(Data):
    """A fire of a routine with ``expect`` that has not ended successfully by ``overdue_since``
    (``fire_at + expect``). ``run_id`` None: the fire never became a run row (its routine's cursor,
    ``next_due_at``, is late); else the run's ``state`` and ``reason``. ``delivered_at``: when its
    alert was answered 2xx (None: not yet, or no alert webhook)."""

    org: str
    uid: str
    routine_id: str
    fire_at: datetime
    overdue_since: datetime
    run_id: str | None = None
    state: str | None = None
    reason: str | None = None
    delivered_at: datetime | None = None

    @property
    def routine_key(self) -> tuple[str, str, str]:
        return (self.org, self.uid, self.routine_id)

    @property
    def fire_key(self) -> FireKey:
        return (self.org, self.uid, self.routine_id, self.fire_at)

    @property
    def key(self) -> str:
        """:func:`alert_key` of this fire (also how reports name it)."""
        return alert_key(self.org, self.uid, self.routine_id, self.fire_at)

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True)
class AlertState(Data):
    """The stored delivery state of one fire's alert (``overdue_alerts``)."""

    org: str
    uid: str
    routine_id: str
    fire_at: datetime
    attempts: int
    next_attempt_at: datetime
    delivered_at: datetime | None = None
