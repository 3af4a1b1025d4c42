"""What tracking a ``task`` routine's fleet task needs: a stored result backend, a message that
expires at the deadline, and a word on a result that came too late.

* :func:`backend_problem`: why a tracked task's result could never be read back by a later collect;
* :func:`send_expires`: the ``expires`` of a tracked send: the deadline, or the routine's
  ``options.expires`` when earlier (:func:`alma_schedule.policies.deadline.message_expires`), so a
  worker that reaches the message late (a backlog) revokes it instead of running it;
* :func:`late_result`: what the result backend says when the run times out (the collect logs it;
  the run stays ``timed_out`` whatever the task does later).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.model import RunRecord
from alma_schedule.policies.deadline import message_expires

if TYPE_CHECKING:
    from celery import Celery

__all__ = ["backend_problem", "late_result", "send_expires"]


def backend_problem(app: Celery) -> str | None:
    """Why results of ``app`` cannot be read back by a later collect, or None."""
    from celery.backends.base import DisabledBackend

    backend = app.backend
    if isinstance(backend, DisabledBackend):
        return (
            f"the Celery app {app.main!r} has no result backend (set result_backend): "
            "a tracked task's result could never be read"
        )
    try:
        from celery.backends.rpc import RPCBackend
    except ImportError:  # pragma: no cover
        RPCBackend = ()
    if isinstance(backend, RPCBackend):
        return (
            "the rpc:// result backend delivers results only to the process that sent the task; "
            "collects run elsewhere, so tracking needs a stored backend (redis, database, ...)"
        )
    return None


def send_expires(options: Mapping[str, Any], deadline: timedelta | None) -> float | None:
    """The ``expires`` (seconds after the send) of a tracked send (None without a deadline)."""
    if deadline is None:
        return None
    after = options.get("expires")
    return message_expires(deadline, float(after) if after is not None else None)


def late_result(app: Celery, record: RunRecord) -> str:
    """One phrase on the tracked task of ``record`` as its run times out."""
    if not record.target_task_id:
        return "no task was sent"
    result = app.AsyncResult(record.target_task_id)
    state = result.state
    if state in ("SUCCESS", "FAILURE"):
        done = getattr(result, "date_done", None)
        at = f" at {done.isoformat() if isinstance(done, datetime) else done}" if done else ""
        return f"its task {record.target_task_id} finished late ({state}{at}); the run stays timed_out"
    if state == "REVOKED":
        return f"its task {record.target_task_id} was revoked (an expired message never starts)"
    return f"its task {record.target_task_id} is {state}: a late result will not change the run"
