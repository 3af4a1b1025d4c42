"""The failure streak and its auto-pause latch (``docs/architecture.md``, the failure streak).

:func:`streak_effect` is the ONE place the rule lives: what a terminal ``finish(state, reason)``
does to its routine's ``consecutive_failures`` (the table of ``docs/architecture.md``, as seed
000 counts it):

* ``+1`` (:attr:`StreakEffect.COUNT`): ``timed_out``; ``failed`` with any reason except those of
  :data:`NO_VERDICT`; ``refused`` at start (:data:`REFUSED_AT_START`: ``not_admitted``,
  ``routing_unavailable``: seed 000 counts start failures) while ``streak_counts_refused`` is on
  (the default);
* ``reset`` (:attr:`StreakEffect.RESET`, the streak becomes 0): ``completed`` with any reason
  except ``sent`` (an untracked fleet task: only the send is known, which proves nothing);
* ``none`` (:attr:`StreakEffect.NONE`): everything else: ``failed(config_revision_changed)`` (the
  routine changed under the run), ``failed(provider_gone)`` (seed 000's GONE: the tracked target
  vanished, no verdict), ``failed(worker_lost)`` (Celery lost the owner of an untracked task run:
  no verdict on the routine), ``completed(sent)``, every other ``refused`` (``ceiling_reached``,
  ``cap_exceeded``, ``not_allowed``: a routine at its daily ceiling must not pause itself), every
  ``skipped``, and any non-terminal state.

The operator's ``record`` never moves the streak (it does not call this). A count that brings the
streak to ``threshold`` or more (``threshold > 0``; 0 = never) latches an automatic pause with the
reason ``failure_streak:<reason>`` (the state when there is no reason), unless the routine is
already paused: the first pause reason wins. A latched pause also clears ``next_due_at``.
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
