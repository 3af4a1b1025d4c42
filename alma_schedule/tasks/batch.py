"""What an ``alma_schedule.run_many`` message does: several claimed fires, each started on its own.

docs/architecture.md, section "The modules, in detail" (tasks/batch.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import RunKey
from alma_schedule.model.time import aware_utc
from alma_schedule.policies.ownership import owner_of
from alma_schedule.tasks.metrics import observe_run

if TYPE_CHECKING:
    from alma_schedule.tasks.composition import Composition

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PackedFire:
    key: RunKey
    expires_at: datetime

    def message(self) -> tuple[list[str], datetime]:
        return self.key.args(), self.expires_at


def unpack(fires: Sequence[Any]) -> list[PackedFire]:
    """``[[org, uid, routine_id, run_id, expires_iso], ...]`` -> fires (:class:`InvalidInput` if malformed)."""
    out: list[PackedFire] = []
    if not isinstance(fires, (list, tuple)):
        raise InvalidInput("run_many takes a list of fires")
    for fire in fires:
        if not isinstance(fire, (list, tuple)) or len(fire) != 5 or not all(isinstance(v, str) for v in fire):
            raise InvalidInput("a run_many fire is [org, uid, routine_id, run_id, expires_at ISO]")
        try:
            expires = datetime.fromisoformat(fire[4].replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"expires_at {fire[4]!r} is not an ISO instant") from None
        if expires.tzinfo is None:
            raise InvalidInput(f"expires_at {fire[4]!r} has no UTC offset")
        out.append(PackedFire(RunKey(fire[0], fire[1], fire[2], fire[3]), aware_utc("expires_at", expires)))
    return out


class _Pending:
    """The fires not started yet; the loop and the watchdog each take from it under one lock."""

    def __init__(self, fires: list[PackedFire]) -> None:
        self._fires = deque(fires)
        self._lock = threading.Lock()

    def next(self) -> PackedFire | None:
        with self._lock:
            return self._fires.popleft() if self._fires else None

    def take_all(self) -> list[PackedFire]:
        with self._lock:
            rest = list(self._fires)
            self._fires.clear()
            return rest


def run_batch(composition: Composition, fires: Sequence[Any], request_id: str | None = None) -> dict[str, Any]:
    """Execute packed fires one by one (see the module docstring). Returns counts for the log/Flower.

    Each fire's run is owned by ``<request_id>/<org>/<uid>/<routine_id>/<run_id>``
    (:func:`~alma_schedule.policies.ownership.owner_of`), so Celery's loss report for this message
    finds exactly the fires it had started."""
    from alma_schedule.tasks.dispatcher import CeleryDispatcher

    settings = composition.settings
    pending = _Pending(unpack(fires))
    forwarded: list[int] = []

    def forward() -> None:
        rest = pending.take_all()
        if not rest:
            return
        try:
            CeleryDispatcher(composition.app, settings).send_each(f.message() for f in rest)
            forwarded.append(len(rest))
            log.info("run_many: re-sent %d unstarted fire(s) as single run messages", len(rest))
        except Exception as exc:  # they stay claimed: a later tick re-sends them
            log.warning("run_many: could not re-send %d fire(s): %s", len(rest), type(exc).__name__)

    watchdog = threading.Timer(settings.run_batch_budget.total_seconds(), forward)
    watchdog.daemon = True
    watchdog.start()
    states: dict[str, int] = {}
    expired = 0
    try:
        schedule = composition.schedule()
        while (fire := pending.next()) is not None:
            now = settings.time_source()
            if fire.expires_at <= now:
                expired += 1  # left claimed: the tick's sweep records skipped(missed)
                continue
            owner = owner_of(request_id, fire.key) if request_id else None
            # no now: it starts and finishes at the clock's own instants
            record = schedule.execute(fire.key, owner=owner, sleep=time.sleep)
            observe_run(record, started_here=record.started_at is not None)
            states[record.state] = states.get(record.state, 0) + 1
    finally:
        watchdog.cancel()
    return {"fires": len(fires), "states": states, "expired": expired, "resent": sum(forwarded)}
