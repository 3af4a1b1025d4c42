"""Celery's loss reports, received in the worker parent: a killed run is seen at once.

docs/architecture.md, section "The modules, in detail" (tasks/loss_reports.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from celery import signals
from celery.exceptions import TimeLimitExceeded, WorkerLostError

from alma_schedule.errors import StoreUnavailable
from alma_schedule.model import RUN_MANY_TASK, RUN_TASK, BlockedWhy
from alma_schedule.policies.finish_retry import retry_delay

if TYPE_CHECKING:
    from alma_schedule.tasks.composition import Composition

log = logging.getLogger(__name__)

__all__ = ["COUNTS", "REPORT_RETRY_BUDGET", "apply_report", "connect_loss_reports", "loss_why"]

#: How long a loss report that meets the store unreachable keeps being applied again (seconds).
REPORT_RETRY_BUDGET = 120.0

#: What the receivers of this process did: ``reports`` (ours, handled), ``failed`` / ``blocked``
#: (runs), ``errors`` (a report that could not be applied). Read by tests and a debugger.
COUNTS: Counter[str] = Counter()

_OURS = frozenset({RUN_TASK, RUN_MANY_TASK})


def loss_why(exception: object) -> BlockedWhy | None:
    """The blocked why of a loss report's exception, None for any other failure."""
    if isinstance(exception, WorkerLostError):
        return BlockedWhy.WORKER_LOST
    if isinstance(exception, TimeLimitExceeded):
        return BlockedWhy.TIME_LIMIT
    return None


def connect_loss_reports(composition: Composition) -> bool:
    """Connect the ``task_failure`` receiver for ``composition``'s app in this process (idempotent;
    True when connected now)."""
    uid = f"alma_schedule.loss_reports.{id(composition)}"
    pid = os.getpid()

    def on_task_failure(sender: Any = None, task_id: Any = None, exception: Any = None, **_: Any) -> None:
        try:
            if os.getpid() != pid or getattr(sender, "name", None) not in _OURS:
                return
            if getattr(sender, "app", None) is not composition.app:
                return
            why = loss_why(exception)
            if why is None or not isinstance(task_id, str) or not task_id:
                return
            apply_report(composition.schedule(), task_id, why)
        except Exception as exc:  # never into Celery's parent: log and count
            COUNTS["errors"] += 1
            log.error("loss report for %s %s not applied: %s: %s", sender, task_id, type(exc).__name__, exc)

    before = len(signals.task_failure.receivers)
    signals.task_failure.connect(on_task_failure, weak=False, dispatch_uid=uid)
    return len(signals.task_failure.receivers) > before


def apply_report(
    schedule: Any, task_id: str, why: BlockedWhy, *, budget: float = REPORT_RETRY_BUDGET, attempt: int = 0
) -> None:
    """``schedule.report_lost(task_id, why)``; while the store is unreachable, again later in a timer
    thread (the back-off of ``policies.finish_retry``, within ``budget`` seconds). Never raises."""
    deadline = time.monotonic() + budget
    try:
        report = schedule.report_lost(task_id, why, now=schedule.settings.time_source())
    except StoreUnavailable as exc:
        _again(schedule, task_id, why, deadline, attempt, str(exc))
        return
    except Exception as exc:
        COUNTS["errors"] += 1
        log.error("loss report for %s not applied: %s: %s", task_id, type(exc).__name__, exc)
        return
    COUNTS["reports"] += 1
    COUNTS["failed"] += len(report.failed)
    COUNTS["blocked"] += len(report.blocked)
    if report.errors:  # some runs could not be moved (the store went away mid-report): again
        _again(schedule, task_id, why, deadline, attempt, f"{report.errors} run(s) not moved")


def _again(schedule: Any, task_id: str, why: BlockedWhy, deadline: float, attempt: int, cause: str) -> None:
    """Apply the report again after the back-off, in a timer thread, while the budget lasts."""
    delay = retry_delay(attempt + 1, deadline - time.monotonic())
    if delay is None:
        COUNTS["errors"] += 1
        log.error("loss report for %s not applied: the store stayed unreachable (%s)", task_id, cause)
        return
    COUNTS["retries"] += 1
    log.warning("loss report for %s: %s; again in %.1f s", task_id, cause, delay)
    left = deadline - time.monotonic() - delay
    timer = threading.Timer(delay, apply_report, (schedule, task_id, why), {"budget": left, "attempt": attempt + 1})
    timer.daemon = True
    timer.start()
