"""Beat's tick entry as a schedule object of ours: beat wakes at the next due instant.

docs/architecture.md, section "The modules, in detail" (tasks/beat_schedule.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from celery.beat import BeatLazyFunc
from celery.schedules import BaseSchedule, schedstate, schedule
from kombu.utils.imports import symbol_by_name

from alma_schedule.policies.wake import BEAT_FLOOR, Wake
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
        self._clock = settings.time_source
        self._waker = Waker(rules_of(settings), hint)
        self._after_tick = max(settings.min_wake_interval.total_seconds(), FLOOR_SECONDS)
        self._due: tuple[Wake, datetime] | None = None

    def is_due(self, last_run_at: datetime) -> schedstate:
        """Due when the policy says so. Beat also asks while it builds its heap, without sending:
        the tick counts as sent only when beat evaluates its ``woken_for`` (:meth:`sending`)."""
        now = self._clock()
        wake = self._waker.check(now)
        if wake.due:
            self._due = (wake, now)
            return schedstate(True, self._after_tick)
        self._due = None
        return schedstate(False, max((wake.at - now).total_seconds(), FLOOR_SECONDS))

    def sending(self) -> datetime | None:
        """Beat is sending the tick its last due answer asked for: record it; the instant it is for."""
        if self._due is None:  # beat sends without our answer (another caller of apply_entry)
            now = self._clock()
            self._due = (Wake(True, now, now, "heartbeat"), now)
        wake, at = self._due
        self._due = None
        self._waker.sent(wake, at)
        return wake.woken_for

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        now = self._clock()
        return max(self._waker.check(now).at - now, timedelta(0))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Lookup(f"{__name__}:revive", schedule), (self.run_every,))

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
        at = self._schedule.sending()
        return None if at is None else at.isoformat()

    def __reduce__(self) -> tuple[Any, ...]:
        return (Lookup(f"{__name__}:revive_woken_for", str), ())


class Lookup:
    """Pickles as ``symbol_by_name(path, default=default)``: the object at ``path`` where it imports,
    else ``default`` (``symbol_by_name`` answers ImportError and AttributeError with it)."""

    def __init__(self, path: str, default: Any) -> None:
        self.path, self.default = path, default

    def __call__(self, *args: Any) -> Any:  # pickle asks that the first item of a reduce be callable
        return symbol_by_name(self.path, None, None, None, ".", self.default)(*args)  # type: ignore[no-untyped-call]

    def __reduce__(self) -> tuple[Any, ...]:
        return (symbol_by_name, (self.path, None, None, None, ".", self.default))


#: The schedule this process installed (beat reads its entries back from its file at each sync).
_LIVE: list[HintSchedule] = []
_LIVE_KWARGS: list[WokenFor] = []


def revive(run_every: Any) -> Any:
    """Unpickling in a beat: the live schedule of this process when it has one for this period,
    else a plain ``schedule(run_every)`` (a beat whose app no longer installs us)."""
    live = _LIVE[-1] if _LIVE else None
    if live is not None and live.run_every == schedule(run_every).run_every:
        return live
    return schedule(run_every)


def revive_woken_for() -> Any:
    """Unpickling in a beat: the live schedule's ``woken_for`` argument, else an empty string."""
    return _LIVE_KWARGS[-1] if _LIVE_KWARGS else ""


def hint_entry(settings: Settings, hint: HintReader | None) -> dict[str, Any]:
    """The tick entry that follows the hint (Celery's own schedulers); this process's live one."""
    sched = HintSchedule(settings, hint)
    woken_for = WokenFor(sched)
    _LIVE[:] = [sched]
    _LIVE_KWARGS[:] = [woken_for]
    return {
        "task": "alma_schedule.tick",
        "schedule": sched,
        "kwargs": {"woken_for": woken_for},
        "options": {"expires": settings.tick_expires.total_seconds(), "serializer": "json", "ignore_result": True},
    }
