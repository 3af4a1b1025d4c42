"""The failure streak and its auto-pause latch (``docs/architecture.md``, the failure streak).

A run's terminal ``finish`` moves its routine's ``consecutive_failures``:

* it COUNTS (streak + 1) when the outcome is ``timed_out``, or ``failed`` with any reason except
  those of :data:`NOT_THE_ROUTINES_FAILURE`: ``config_revision_changed`` (the routine changed
  under the run) and ``worker_lost`` (Celery lost the owner of an untracked task run: no verdict
  on the routine);
* it RESETS (streak 0) when the outcome is ``completed`` with any reason except ``sent`` (sent is
  not yet delivered: it proves nothing);
* every other outcome (``refused``, ``skipped``, ``failed(config_revision_changed)``,
  ``failed(worker_lost)``, ``completed(sent)``) leaves the streak as it is.

A count that brings the streak to ``threshold`` or more (``threshold > 0``; 0 = never) latches an
automatic pause with the reason ``failure_streak:<reason>`` (the outcome when there is no reason),
unless the routine is already paused: the first pause reason wins. A latched pause also clears
``next_due_at`` (a paused routine is never due). The operator's ``record`` never moves the streak.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from alma_schedule.model import Reason, RunState

__all__ = [
    "LATCH_PREFIX",
    "NOT_THE_ROUTINES_FAILURE",
    "StreakStep",
    "counts",
    "fold",
    "latch_reason",
    "resets",
    "step",
    "touches",
]

#: The paused_reason prefix of a pause latched by the streak.
LATCH_PREFIX = "failure_streak:"

#: ``failed`` reasons that say nothing about the routine: they never count.
NOT_THE_ROUTINES_FAILURE: frozenset[str] = frozenset({Reason.CONFIG_REVISION_CHANGED, Reason.WORKER_LOST})


def counts(outcome: str, reason: str | None) -> bool:
    """Whether finishing with ``outcome(reason)`` adds one to the streak."""
    return outcome == RunState.TIMED_OUT or (outcome == RunState.FAILED and reason not in NOT_THE_ROUTINES_FAILURE)


def resets(outcome: str, reason: str | None) -> bool:
    """Whether finishing with ``outcome(reason)`` resets the streak to 0."""
    return outcome == RunState.COMPLETED and reason != Reason.SENT


def touches(outcome: str, reason: str | None) -> bool:
    """Whether the outcome may change the routine row at all (a store locks the row only then)."""
    return counts(outcome, reason) or resets(outcome, reason)


def latch_reason(outcome: str, reason: str | None) -> str:
    """The paused_reason a latch records: ``failure_streak:<reason or outcome>``."""
    return f"{LATCH_PREFIX}{reason or outcome}"


@dataclass(frozen=True, slots=True)
class StreakStep:
    """What one finish does to the routine row.

    ``streak`` is the new ``consecutive_failures``; ``latch`` the paused_reason to set now (None: no
    new pause; when set, ``next_due_at`` becomes NULL too); ``changed`` whether the row is written
    at all (a reset of a streak already 0 writes nothing).
    """

    streak: int
    latch: str | None
    changed: bool


def step(streak: int, paused_reason: str | None, outcome: str, reason: str | None, threshold: int) -> StreakStep:
    """The routine row after one ``finish(outcome, reason)``, from its ``consecutive_failures``
    (``streak``), its current ``paused_reason`` and ``Timers.failure_threshold``."""
    if counts(outcome, reason):
        new = streak + 1
        latch = None
        if threshold > 0 and new >= threshold and paused_reason is None:
            latch = latch_reason(outcome, reason)
        return StreakStep(new, latch, True)
    if resets(outcome, reason):
        return StreakStep(0, None, streak != 0)
    return StreakStep(streak, None, False)


def fold(
    results: Iterable[tuple[str, str | None]],
    threshold: int,
    *,
    streak: int = 0,
    paused_reason: str | None = None,
) -> tuple[int, str | None]:
    """``(consecutive_failures, paused_reason)`` after finishing with each ``(outcome, reason)`` in
    turn, starting from ``streak`` and ``paused_reason``: :func:`step` folded over the sequence."""
    for outcome, reason in results:
        s = step(streak, paused_reason, outcome, reason, threshold)
        streak = s.streak
        paused_reason = s.latch if s.latch is not None else paused_reason
    return streak, paused_reason
