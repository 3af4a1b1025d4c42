"""Beat's tick entry as a schedule object of ours: beat wakes at the next due instant.

:class:`HintSchedule` subclasses ``celery.schedules.BaseSchedule`` (the extension point Celery's own
``solar`` uses): no scheduler class, thread or loop of ours runs in beat. Its ``is_due`` answers
from the wake-up hint (:class:`~alma_schedule.waker.Waker`: the hint read fresh at each check, at
least every ``hint_poll``; a tick at least once per ``tick_period``, the heartbeat), and never
answers "not due" with less than :data:`BEAT_FLOOR` (beat subtracts 10 ms from every answer and
would spin on less). The tick it makes beat send carries the instant it was woken for
(``woken_for``, through a :class:`celery.beat.BeatLazyFunc` that beat evaluates at send time).

Beat pickles its entries into its schedule file every 3 minutes and at shutdown: the schedule
pickles as a plain ``celery.schedules.schedule(run_every=tick_period)`` and ``woken_for`` as an
empty string (``__reduce__``), holding no connection, so a fleet that uninstalls or downgrades us
still starts beat on that file; ``beat_init`` re-installs ours at each start (beat drops entries
its app's ``beat_schedule`` does not name before it). See docs/architecture.md, "The clock".
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from celery.beat import BeatLazyFunc
from celery.schedules import BaseSchedule, schedstate, schedule

from alma_schedule.policies.wake import BEAT_FLOOR
from alma_schedule.waker import HintReader, Waker, rules_of

if TYPE_CHECKING:
    from alma_schedule.settings import Settings

#: The least "not due" answer: beat's ``adjust`` subtracts 10 ms, so 10 ms would become 0 and spin.
FLOOR_SECONDS = max(BEAT_FLOOR.total_seconds(), 0.02)


class HintSchedule(BaseSchedule):
    """Due at the next due instant (the store's hint), at least once per ``tick_period``."""

    def __init__(self, settings: Settings, hint: HintReader | None, app: Any = None) -> None:
        super().__init__(app=app)
        self.run_every = settings.tick_period
        self._clock = settings.clock
        self._waker = Waker(rules_of(settings), hint)
        self._after_tick = max(settings.min_wake_interval.total_seconds(), FLOOR_SECONDS)
        #: The instant the last due answer was woken for (what the tick message carries).
        self.woken_for: datetime | None = None

    def is_due(self, last_run_at: datetime) -> schedstate:
        now = self._clock()
        wake = self._waker.check(now)
        if wake.due:
            self._waker.sent(wake, now)
            self.woken_for = wake.woken_for
            return schedstate(True, self._after_tick)
        return schedstate(False, max((wake.at - now).total_seconds(), FLOOR_SECONDS))

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        now = self._clock()
        return max(self._waker.check(now).at - now, timedelta(0))

    def __reduce__(self) -> tuple[Any, ...]:
        return (schedule, (self.run_every,))

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<alma-schedule: at the next due instant, heartbeat {self.run_every}>"


class WokenFor(BeatLazyFunc):
    """``woken_for`` of the tick beat sends: the instant :class:`HintSchedule` last woke for."""

    def __init__(self, sched: HintSchedule) -> None:
        super().__init__(self._value)
        self._schedule = sched

    def _value(self) -> str | None:
        at = self._schedule.woken_for
        return None if at is None else at.isoformat()

    def __reduce__(self) -> tuple[Any, ...]:
        return (str, ("",))


def hint_entry(settings: Settings, hint: HintReader | None) -> dict[str, Any]:
    """The tick entry that follows the hint (Celery's own schedulers)."""
    sched = HintSchedule(settings, hint)
    return {
        "task": "alma_schedule.tick",
        "schedule": sched,
        "kwargs": {"woken_for": WokenFor(sched)},
        "options": {"expires": settings.tick_expires.total_seconds(), "serializer": "json", "ignore_result": True},
    }
