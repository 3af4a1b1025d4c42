"""What every engine operation shares: the store, the settings, the runners, the dispatcher, the time.

:class:`Runtime` is built once by :func:`alma_schedule.engine.create_schedule`. It owns the two rules
every entry point applies before anything else:

* ``now``: a caller's instant, defaulting to the time source (``settings.clock()``) and clamped by
  :func:`~alma_schedule.model.time.trusted_now` to ``min(now, time + clock_tolerance)`` for every
  call that writes (a caller a year ahead claims nothing early, advances no cursor and moves no
  anchor). ``plan`` uses :meth:`Runtime.peek_now`
  (no clamp: it writes nothing).
* runner resolution: ``runner`` is a :class:`~alma_schedule.model.RoutineRunner` (it has
  ``run``) or a resolver ``(routine) -> RoutineRunner``. :meth:`Runtime.resolve` raises
  :class:`UnknownKind` when a resolver raises or returns something that cannot run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from alma_schedule.errors import AlmaScheduleError, InvalidInput, RunnerError
from alma_schedule.model import Dispatcher, Reason, Routine, RoutineRunner
from alma_schedule.model.time import aware_utc, trusted_now
from alma_schedule.settings import Settings, Timers
from alma_schedule.stores.base import Store

log = logging.getLogger("alma_schedule.engine")


@dataclass
class ZoneCheck:
    """Whether this process has seen the store record its zone data (then it never asks again)."""

    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


Resolver = Callable[[Routine], RoutineRunner]
RunnerSource = RoutineRunner | Resolver


class UnknownKind(RunnerError):
    """No runner serves this routine (the resolver raised or returned something without ``run``).

    ``cause`` is the class name of what the resolver raised, if anything.
    """

    def __init__(self, message: str, *, cause: str | None = None) -> None:
        super().__init__(message, reason=Reason.UNKNOWN_KIND)
        self.cause = cause


def as_resolver(runner: object) -> Resolver:
    """A resolver for ``runner``: itself when it is a resolver, a constant function when it runs."""
    if hasattr(runner, "run"):
        fixed = cast(RoutineRunner, runner)
        return lambda _routine: fixed
    if callable(runner):
        return cast(Resolver, runner)
    raise InvalidInput("runner must be a RoutineRunner (with .run) or a resolver (routine) -> RoutineRunner")


@dataclass(frozen=True, slots=True)
class Runtime:
    """The engine's shared parts. Immutable; safe to share between threads."""

    store: Store
    settings: Settings
    timers: Timers
    resolver: Resolver
    dispatcher: Dispatcher
    #: This process's zone data check (the one mutable part: a flag set once; engine/zones.py).
    zones: ZoneCheck = field(default_factory=lambda: ZoneCheck(), compare=False)

    def now(self, now: datetime | None) -> datetime:
        """The instant a WRITING call acts at: :func:`trusted_now` with ``clock_tolerance``."""
        return trusted_now(now, self.settings.clock, self.settings.clock_tolerance)

    def peek_now(self, now: datetime | None) -> datetime:
        """The instant a READ-ONLY call looks at (any instant, unclamped; the time source's by default)."""
        if now is None:
            return aware_utc("the time source's instant", self.settings.clock())
        return aware_utc("now", now)

    def resolve(self, routine: Routine) -> RoutineRunner:
        """The runner of ``routine``; :class:`UnknownKind` if none can be had."""
        try:
            runner: Any = self.resolver(routine)
        except Exception as exc:
            # our own errors name the setting and the cause (e.g. the fleet app's import error);
            # anything else shows only its class
            why = str(exc) if isinstance(exc, AlmaScheduleError) else type(exc).__name__
            raise UnknownKind(f"no runner for kind {routine.kind!r}: {why}", cause=type(exc).__name__) from exc
        if runner is None or not hasattr(runner, "run"):
            raise UnknownKind(f"no runner for kind {routine.kind!r}")
        return cast(RoutineRunner, runner)
