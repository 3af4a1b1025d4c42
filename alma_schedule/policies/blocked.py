"""Why a run is blocked: the words a tick report and ``runs stuck`` show beside it.

docs/architecture.md, section "The modules, in detail" (policies/blocked.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alma_schedule.model import RunRecord, RunState

__all__ = ["HARD_LIMIT_GRACE", "LONG_RUNNING", "PAST_DEADLINE", "PAST_HARD_LIMIT", "blocked_why", "hard_limit_note"]

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


# --- killed runs: "past its hard limit", information only ---

#: Between a run task's soft time limit (``run_time_limit``) and its hard one (Celery's ``time_limit``).
HARD_LIMIT_GRACE = timedelta(seconds=30)
#: The note ``runs stuck`` shows beside a ``running`` run started longer ago than its hard limit.
PAST_HARD_LIMIT = "past its hard limit"


def hard_limit_note(rec: RunRecord, now: datetime, run_time_limit: timedelta) -> str | None:
    """:data:`PAST_HARD_LIMIT` for a ``running`` run started more than ``run_time_limit +``
    :data:`HARD_LIMIT_GRACE` before ``now``, else None. Information only: age proves nothing (the
    owner may be a packed ``run_many`` with a longer limit, or its parent was SIGKILLed and
    reported nothing); it never makes a run stuck, blocked or finished."""
    if rec.state != RunState.RUNNING or rec.started_at is None:
        return None
    return PAST_HARD_LIMIT if now - rec.started_at > run_time_limit + HARD_LIMIT_GRACE else None


# --- end killed runs ---
