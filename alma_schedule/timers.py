"""The timer family the engine hands to the store, built from :class:`~alma_schedule.settings.Settings`
(re-exported there, its home since 0.1.0)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol


class TimerSettings(Protocol):
    """What :meth:`Timers.from_settings` reads (``Settings`` has it; named here so this module
    never imports the settings module, which re-exports it)."""

    @property
    def resend_first(self) -> timedelta: ...

    @property
    def resend_max(self) -> timedelta: ...

    @property
    def poll_first(self) -> timedelta: ...

    @property
    def poll_max(self) -> timedelta: ...

    @property
    def defer_first(self) -> timedelta: ...

    @property
    def defer_max(self) -> timedelta: ...

    @property
    def one_shot_window(self) -> timedelta: ...

    @property
    def run_time_limit(self) -> timedelta: ...

    @property
    def failure_threshold(self) -> int: ...

    @property
    def result_retention(self) -> timedelta: ...

    @property
    def streak_counts_refused(self) -> bool: ...

    @property
    def clock_tolerance(self) -> timedelta: ...


@dataclass(frozen=True, slots=True)
class Timers:
    """The timer family the engine hands to the store (the store holds no policy of its own)."""

    resend_first: timedelta
    resend_max: timedelta
    poll_first: timedelta
    poll_max: timedelta
    defer_first: timedelta
    defer_max: timedelta
    one_shot_window: timedelta
    run_time_limit: timedelta
    failure_threshold: int
    result_retention: timedelta
    #: ``refused(not_admitted)`` and ``refused(routing_unavailable)`` count for the streak.
    streak_counts_refused: bool = True
    #: How far a caller's ``now`` may lead: a deadline is enforced at ``deadline + clock_tolerance``.
    clock_tolerance: timedelta = timedelta(seconds=2)

    @classmethod
    def from_settings(cls, s: TimerSettings) -> Timers:
        return cls(
            resend_first=s.resend_first,
            resend_max=s.resend_max,
            poll_first=s.poll_first,
            poll_max=s.poll_max,
            defer_first=s.defer_first,
            defer_max=s.defer_max,
            one_shot_window=s.one_shot_window,
            run_time_limit=s.run_time_limit,
            failure_threshold=s.failure_threshold,
            result_retention=s.result_retention,
            streak_counts_refused=s.streak_counts_refused,
            clock_tolerance=s.clock_tolerance,
        )

    @staticmethod
    def backoff(first: timedelta, cap: timedelta, attempts: int) -> timedelta:
        """``first * 2**attempts``, capped at ``cap`` (attempts counts sends already made)."""
        if attempts >= 30:
            return cap
        grown: timedelta = first * (2**attempts)
        return min(grown, cap)
