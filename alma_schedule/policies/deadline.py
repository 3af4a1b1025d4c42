"""A submitted run's deadline: when its message expires, and when it is ``timed_out``.

A tracked ``task`` run (and any submitted run) has a ``deadline``. Two rules keep ``timed_out`` meaning
"did not run in time":

* :func:`message_expires`: the message of a tracked task carries Celery's ``expires`` at the
  deadline (the earlier of that and the routine's own ``options.expires``, seconds after the send,
  wins), so a worker that reaches it late (a backlog) revokes it instead of running it;
* :func:`timed_out`: the run is recorded ``timed_out`` only once ``now`` reaches the deadline plus
  ``clock_tolerance`` (how far a worker's clock may trail ours), never before (the poll that
  records it is due then: :func:`alma_schedule.policies.backoff.next_poll`): by then every worker
  within the tolerance sees the message expired. A task that had already started may still finish;
  its late result changes nothing (the run is terminal), and the collect that times it out logs
  what the target's state was.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["message_expires", "timed_out"]


def message_expires(deadline_in: timedelta, expires_after: float | None) -> float:
    """The ``expires`` of a tracked task's message, in seconds after the send: the deadline
    (``deadline_in`` from the send), or the routine's ``options.expires`` when that is earlier.

    Seconds, not an instant: Celery stamps them with the sender's clock as it publishes, as it
    checks them with the worker's, so a caller's ``now`` (a simulated one in tests) never makes a
    message expire in the past; the time between ``now`` and the send only adds to it, which
    ``clock_tolerance`` covers."""
    seconds = deadline_in.total_seconds()
    return seconds if expires_after is None else min(seconds, float(expires_after))


def timed_out(deadline: datetime | None, now: datetime, tolerance: timedelta) -> bool:
    """Whether a submitted run with ``deadline`` is ``timed_out`` at ``now`` (at or past
    ``deadline + tolerance``, the instant its poll is due); a run without a deadline never is."""
    return deadline is not None and now >= deadline + tolerance
