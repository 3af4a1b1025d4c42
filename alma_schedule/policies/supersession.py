"""Supersession versus overlap: a newer schedule fire and the routine's open run
(``docs/architecture.md``, the run and the claim).

docs/architecture.md, section "The modules, in detail" (policies/supersession.py).
"""

from __future__ import annotations

import enum

from alma_schedule.model import Reason, RunState

__all__ = [
    "MISSED",
    "OVERLAP",
    "SUPERSEDABLE_ORIGIN",
    "SUPERSEDABLE_STATE",
    "SUPERSEDED",
    "Placement",
    "lost_start_reason",
    "place",
    "supersedable",
]

#: The open run a newer fire supersedes: a ``claimed`` run of origin ``schedule``.
SUPERSEDABLE_STATE = RunState.CLAIMED
SUPERSEDABLE_ORIGIN = "schedule"
#: ``(state, reason)`` a superseded run takes; a fire recorded blocked; a fire decided missed.
SUPERSEDED: tuple[RunState, Reason] = (RunState.SKIPPED, Reason.MISSED)
OVERLAP: tuple[RunState, Reason] = (RunState.SKIPPED, Reason.OVERLAP)
MISSED: tuple[RunState, Reason] = (RunState.SKIPPED, Reason.MISSED)
#: a calendar fire that rolled onto a day another fire of the routine runs (``Fire.collided``)
CALENDAR: tuple[RunState, Reason] = (RunState.SKIPPED, Reason.CALENDAR)


class Placement(enum.StrEnum):
    """Where a new schedule fire goes."""

    CLAIM = "claim"  # no open run: claimed
    SUPERSEDE = "supersede"  # the open run is superseded (skipped(missed)), then the fire is claimed
    OVERLAP = "overlap"  # the open run blocks: the fire is recorded skipped(overlap)
    MISSED = "missed"  # decided missed: recorded skipped(missed), nothing else moves
    BUFFER = "buffer"  # the open run blocks and the routine buffers (overlap latest): buffered


def supersedable(state: str, origin: str) -> bool:
    """Whether an open run in ``state`` of ``origin`` gives way to a newer schedule fire."""
    return state == SUPERSEDABLE_STATE and origin == SUPERSEDABLE_ORIGIN


def place(missed: bool, open_state: str | None, open_origin: str | None, *, buffer: bool = False) -> Placement:
    """The placement of a new schedule fire, given whether ``decide`` called it missed, the state
    and origin of the routine's non-terminal run (None, None: there is none), and whether the
    routine buffers a blocked fire (``Fire.buffer``, overlap ``latest``)."""
    if missed:
        return Placement.MISSED
    if open_state is None:
        return Placement.CLAIM
    if supersedable(open_state, open_origin or ""):
        return Placement.SUPERSEDE
    return Placement.BUFFER if buffer else Placement.OVERLAP


def lost_start_reason(state: str, reason: str | None) -> str:
    """The reason a ``start`` of a run that is no longer ``claimed`` loses with: ``superseded`` when
    the row is ``skipped(missed)``, else ``duplicate``."""
    return "superseded" if (state, reason) == SUPERSEDED else "duplicate"
