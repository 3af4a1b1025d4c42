"""The failure streak and its auto-pause latch (docs/architecture.md, section "The failure streak").

docs/architecture.md, section "The modules, in detail" (policies/streak.py).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from alma_schedule.model import Reason, RunState

__all__ = [
    "LATCH_PREFIX",
    "NO_VERDICT",
    "REFUSED_AT_START",
    "StreakEffect",
    "StreakStep",
    "counts",
    "fold",
    "latch_reason",
    "resets",
    "step",
    "streak_effect",
    "touches",
]

#: The paused_reason prefix of a pause latched by the streak.
LATCH_PREFIX = "failure_streak:"

#: ``failed`` reasons that are no verdict on the routine: neither counted nor reset.
NO_VERDICT: frozenset[str] = frozenset({Reason.CONFIG_REVISION_CHANGED, Reason.PROVIDER_GONE, Reason.WORKER_LOST})

#: ``refused`` reasons of a start that failed (seed 000 counts them), with ``streak_counts_refused``.
REFUSED_AT_START: frozenset[str] = frozenset({Reason.NOT_ADMITTED, Reason.ROUTING_UNAVAILABLE})


class StreakEffect(enum.StrEnum):
    """What one terminal result does to the streak: ``+1``, ``reset`` (to 0) or ``none``."""

    COUNT = "+1"
    RESET = "reset"
    NONE = "none"


def streak_effect(state: str, reason: str | None, *, counts_refused: bool = True) -> StreakEffect:
    """The effect of finishing in ``state(reason)`` on the failure streak (the module docstring's
    table); ``counts_refused`` is the setting ``streak_counts_refused``."""
    if state == RunState.TIMED_OUT:
        return StreakEffect.COUNT
    if state == RunState.FAILED:
        return StreakEffect.NONE if reason in NO_VERDICT else StreakEffect.COUNT
    if state == RunState.COMPLETED:
        return StreakEffect.NONE if reason == Reason.SENT else StreakEffect.RESET
    if state == RunState.REFUSED and counts_refused and reason in REFUSED_AT_START:
        return StreakEffect.COUNT
    return StreakEffect.NONE


def counts(outcome: str, reason: str | None, *, counts_refused: bool = True) -> bool:
    """Whether finishing with ``outcome(reason)`` adds one to the streak (:func:`streak_effect`)."""
    return streak_effect(outcome, reason, counts_refused=counts_refused) is StreakEffect.COUNT


def resets(outcome: str, reason: str | None) -> bool:
    """Whether finishing with ``outcome(reason)`` resets the streak to 0 (:func:`streak_effect`)."""
    return streak_effect(outcome, reason) is StreakEffect.RESET


def touches(outcome: str, reason: str | None, *, counts_refused: bool = True) -> bool:
    """Whether the outcome may change the routine row at all (a store locks the row only then)."""
    return streak_effect(outcome, reason, counts_refused=counts_refused) is not StreakEffect.NONE


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


def step(
    streak: int,
    paused_reason: str | None,
    outcome: str,
    reason: str | None,
    threshold: int,
    *,
    counts_refused: bool = True,
) -> StreakStep:
    """The routine row after one ``finish(outcome, reason)``, from its ``consecutive_failures``
    (``streak``), its current ``paused_reason``, ``Timers.failure_threshold`` and
    ``Timers.streak_counts_refused``."""
    effect = streak_effect(outcome, reason, counts_refused=counts_refused)
    if effect is StreakEffect.COUNT:
        new = streak + 1
        latch = None
        if threshold > 0 and new >= threshold and paused_reason is None:
            latch = latch_reason(outcome, reason)
        return StreakStep(new, latch, True)
    if effect is StreakEffect.RESET:
        return StreakStep(0, None, streak != 0)
    return StreakStep(streak, None, False)


def fold(
    results: Iterable[tuple[str, str | None]],
    threshold: int,
    *,
    streak: int = 0,
    paused_reason: str | None = None,
    counts_refused: bool = True,
) -> tuple[int, str | None]:
    """``(consecutive_failures, paused_reason)`` after finishing with each ``(outcome, reason)`` in
    turn, starting from ``streak`` and ``paused_reason``: :func:`step` folded over the sequence."""
    for outcome, reason in results:
        s = step(streak, paused_reason, outcome, reason, threshold, counts_refused=counts_refused)
        streak = s.streak
        paused_reason = s.latch if s.latch is not None else paused_reason
    return streak, paused_reason
