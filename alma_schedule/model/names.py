"""Task names: what a tick, run, run_many and collect message is called on the broker.

Queue names are settings (``ALMA_TICK_QUEUE``, ``ALMA_RUN_QUEUE``, ``ALMA_COLLECT_QUEUE``), not constants.
"""

from __future__ import annotations

__all__ = ["ALERT_TASK", "COLLECT_TASK", "OUR_TASKS", "RUN_MANY_TASK", "RUN_TASK", "TICK_TASK"]

TICK_TASK = "alma_schedule.tick"
RUN_TASK = "alma_schedule.run"
COLLECT_TASK = "alma_schedule.collect"
#: Several claimed fires in one message (each started on its own just before it runs).
RUN_MANY_TASK = "alma_schedule.run_many"

#: One overdue fire's "did not run" alert (posted to ``ALMA_ALERT_WEBHOOK``; routed to the collect queue).
ALERT_TASK = "alma_schedule.alert"

OUR_TASKS: frozenset[str] = frozenset({TICK_TASK, RUN_TASK, RUN_MANY_TASK, COLLECT_TASK, ALERT_TASK})
