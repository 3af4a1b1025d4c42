"""Why a run is blocked: the words a tick report and ``runs stuck`` show beside it.

A run waits for an operator (guarantee 5: ``running`` is never expired or retried) when

* it is ``running`` and MARKED blocked at once (``Store.mark_blocked``): the why is the marker's,
  one of :class:`~alma_schedule.model.BlockedWhy` (an uncertain provider outcome, Celery's loss
  report for its owner, a time limit);
* it has been in its state longer than twice ``run_time_limit`` (``runs stuck``: its
  ``--older-than``): ``long_running``;
* it is ``submitted`` past its deadline: ``past_deadline``.

The stores list these runs (``Store.blocked``); this module only names why, from the record.
"""

from __future__ import annotations

from datetime import datetime

from alma_schedule.model import RunRecord, RunState

__all__ = ["LONG_RUNNING", "PAST_DEADLINE", "blocked_why"]

#: A run in ``running``/``collecting`` for longer than ``2 x run_time_limit`` (shown, never stored).
LONG_RUNNING = "long_running"
#: A ``submitted`` run past its deadline (shown, never stored).
PAST_DEADLINE = "past_deadline"


def blocked_why(rec: RunRecord, now: datetime) -> str:
    """Why ``rec`` (a run ``Store.blocked`` or ``Store.stuck`` listed at ``now``) waits for an operator."""
    if rec.state == RunState.RUNNING and rec.blocked_why is not None:
        return rec.blocked_why
    if rec.state == RunState.SUBMITTED and rec.deadline is not None and now > rec.deadline:
        return PAST_DEADLINE
    return LONG_RUNNING
