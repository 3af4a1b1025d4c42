"""What every engine operation shares: the store, the settings, the runners, the dispatcher, the time.

docs/architecture.md, section "The modules, in detail" (engine/runtime.py).
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
from alma_schedule.model.protocols import Runs
from alma_schedule.model.time import aware_utc, trusted_now
from alma_schedule.settings import Settings, Timers
from alma_schedule.stores.base import Store

log = logging.getLogger("alma_schedule.engine")


@dataclass
class ZoneCheck:
    """Whether this process has seen the store record its zone data (then it never asks again)."""

    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass
class RetentionCheck:
    """When this process's ticks last pruned runs, and whether that batch was full (the one mutable
    part of :class:`Runtime` besides the zone check; engine/retention.py reads it). Per process: each
    process of a fleet prunes on its own cadence; the store's skip-locked batches never collide."""

    last_at: datetime | None = None
    full: bool = False
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
    if isinstance(runner, Runs):
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
    #: This process's cadence of the run retention (engine/retention.py).
    retention: RetentionCheck = field(default_factory=lambda: RetentionCheck(), compare=False)

    def now(self, now: datetime | None) -> datetime:
        """The instant a writing call acts at: :func:`trusted_now` with ``clock_tolerance``."""
        return trusted_now(now, self.settings.time_source, self.settings.clock_tolerance)

    def peek_now(self, now: datetime | None) -> datetime:
        """The instant a read-only call looks at (any instant, unclamped; the time source's by default)."""
        if now is None:
            return aware_utc("the time source's instant", self.settings.time_source())
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
        if not isinstance(runner, Runs):
            raise UnknownKind(f"no runner for kind {routine.kind!r}")
        return cast(RoutineRunner, runner)
