"""What tracking a ``task`` routine's fleet task needs: a stored result backend, a message that
expires at the deadline, and a word on a result that came too late.

docs/architecture.md, section "The modules, in detail" (runners/task_tracking.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.model import RunKey, RunRecord
from alma_schedule.model.names import COLLECT_TASK
from alma_schedule.policies.deadline import message_expires

if TYPE_CHECKING:
    from celery import Celery

__all__ = ["ENDED_RETRIES", "backend_problem", "ended_link", "late_result", "send_expires"]

#: How often a linked collect looks again for a result not stored yet (Celery sends a success
#: callback just BEFORE it stores the result), a second apart.
ENDED_RETRIES = 10


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


def ended_link(app: Celery, key: RunKey, queue: str) -> Any:
    """The signature the fleet task's ``link`` and ``link_error`` carry: our collect of ``key`` with
    ``ended=True`` on ``queue``, immutable (the task's return value is never sent along). A fixed-delay
    routine's run is so recorded when its task ends, not at the next poll."""
    return app.signature(
        COLLECT_TASK,
        args=[key.org, key.uid, key.routine_id, key.run_id],
        kwargs={"ended": True},
        immutable=True,
        queue=queue,
        serializer="json",
    )
