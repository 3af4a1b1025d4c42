"""``StoreRunHandle``: a runner's only door to its run row (the :class:`RunHandle` protocol).
docs/architecture.md, section "The modules, in detail" (engine/handle.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from alma_schedule.core.zones import get_zone
from alma_schedule.errors import InvalidInput, NotFound
from alma_schedule.model import Ceiling, ClaimResult, ReserveResult, Routine, RunKey, RunRecord, RunState
from alma_schedule.model.time import aware_utc
from alma_schedule.policies import backoff

from .retry import Sleep, collect_as_owner
from .runtime import Runtime

__all__ = ["StoreRunHandle", "money_day"]


def money_day(now: datetime, tz: str) -> str:
    """The ISO calendar day (``YYYY-MM-DD``) of ``now`` in zone ``tz``: the day ceilings count in."""
    return now.astimezone(get_zone(tz)).date().isoformat()


class StoreRunHandle:
    """The :class:`~alma_schedule.model.RunHandle` of one run, over the store.

    docs/architecture.md, "The modules, in detail" (engine/handle.py, StoreRunHandle).
    """

    __slots__ = ("_key", "_now", "_owned", "_owner", "_record", "_routine", "_rt", "_sleep")

    def __init__(
        self,
        runtime: Runtime,
        record: RunRecord,
        routine: Routine | None,
        now: datetime,
        *,
        owned: str | None = None,
        owner: str | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        self._rt = runtime
        self._owner = owner  # a collector's Celery request id, written by its collecting CAS
        self._sleep = sleep
        self._key = record.key
        self._record = record
        self._routine = routine
        self._now = now
        self._owned = owned

    @property
    def key(self) -> RunKey:
        return self._key

    @property
    def now(self) -> datetime:
        return self._now

    @property
    def routine(self) -> Routine | None:
        """The routine row as read when the handle was made (None if it was purged)."""
        return self._routine

    @property
    def record(self) -> RunRecord:
        """The run row as the engine last saw it (call :meth:`result` to re-read)."""
        return self._record

    @property
    def owned_state(self) -> str | None:
        """The state this handle's caller owns (see the class doc); None when it owns none."""
        return self._owned

    @property
    def config_changed(self) -> bool:
        r = self._routine
        return r is None or r.config_revision != self._record.config_revision

    def result(self) -> RunRecord:
        """Re-read the run row (before any egress: an erasure or an operator's ``record`` wins)."""
        k = self._key
        record = self._rt.store.get(k)
        if record is None:
            raise NotFound.of("run", k)
        self._record = record
        return record

    def last_delivery_hash(self) -> str | None:
        """The delivery hash of the routine's last ``completed(delivered)`` run (text suppression)."""
        k = self._key
        last = self._rt.store.last_completed_delivery(k.scope, k.routine_id)
        return None if last is None else last.delivery_hash

    def submit(
        self,
        batch_id: str | None,
        deadline: datetime,
        *,
        target_task_id: str | None = None,
        next_poll_at: datetime | None = None,
    ) -> ClaimResult:
        """CAS ``running -> submitted``; first poll at ``next_poll_at`` (default ``now + poll_first``),
        or at ``deadline + clock_tolerance`` when that comes first (:func:`backoff.next_poll`)."""
        if deadline is None:
            raise InvalidInput("every submission needs a deadline")
        deadline = aware_utc("deadline", deadline)
        timers = self._rt.timers
        scheduled = self._now + timers.poll_first if next_poll_at is None else aware_utc("next_poll_at", next_poll_at)
        first_poll = backoff.next_poll(scheduled, self._now, deadline, timers.clock_tolerance)
        res = self._rt.store.submit(
            self._key,
            now=self._now,
            batch_id=batch_id,
            deadline=deadline,
            next_poll_at=first_poll,
            target_task_id=target_task_id,
        )
        if res.record is not None:
            self._record = res.record
        if res.won:
            self._owned = RunState.SUBMITTED
        return res

    def begin_collecting(self) -> bool:
        """The ``submitted -> collecting`` CAS: True for exactly one caller, the only one that delivers.
        A collector with an owner and a sleep settles a CAS whose answer was lost by the row
        (:func:`~.retry.collect_as_owner`)."""
        res = collect_as_owner(self._rt, self._key, now=self._now, owner=self._owner, sleep=self._sleep)
        if res.record is not None:
            self._record = res.record
        if res.won:
            self._owned = RunState.COLLECTING
        return res.won

    def annotate(self, **values: Any) -> RunRecord:
        """Write session, turn, caps crossed, delivery hash, result text, cost repair (never the state)."""
        record = self._rt.store.annotate(self._key, values)
        self._record = record
        return record

    def reserve(self, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveResult:
        """Reserve a hard per-run bound against every ceiling, all or nothing, on today's money day."""
        day = money_day(self._now, self._rt.settings.money_day_tz)
        res = self._rt.store.reserve(self._key, day, amount_micros, ceilings)
        if res.record is not None:
            self._record = res.record
        return res
