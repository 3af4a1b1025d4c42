"""The chaos suite's fleet: a Celery app of its own (``celery -A chaos_fleet worker``), two fleet
tasks and ``install(app)``, configured from the environment (``ALMA_BROKER_URL``,
``ALMA_RESULT_BACKEND``, ``CHAOS_EFFECTS``).

* ``chaos.untracked(routine_id)``: what an untracked ``task`` routine sends; records one execution.
* ``chaos.tracked(routine_id, seconds)``: what a tracked routine sends; records its start, sleeps,
  records its end (so parallel executions of one routine show as overlapping intervals).

Both are ``acks_late=False`` (acked when they start): an ``acks_late`` message is redelivered after
Redis's visibility timeout and would run twice. A ``task_success`` receiver records each completed
tick's report (``at``, claimed count) in the suite's own table, an ``after_task_publish`` receiver
each fleet task message sent, a ``task_prerun`` receiver which process (and request) began each fire.
"""

from __future__ import annotations

import os
import time
from typing import Any

import chaos_effects
from celery import Celery
from celery.signals import after_task_publish, task_prerun, task_success

from alma_schedule.celery import install
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, TICK_TASK

app = Celery("chaos_fleet", broker=os.environ.get("ALMA_BROKER_URL"), backend=os.environ.get("ALMA_RESULT_BACKEND"))
app.conf.update(
    task_acks_late=False,
    result_expires=3600,
    broker_connection_retry_on_startup=True,
    worker_prefetch_multiplier=1,
    timezone="UTC",
)


@app.task(name="chaos.untracked", bind=True, acks_late=False)
def untracked(self: Any, routine_id: str) -> None:
    row = chaos_effects.started("untracked", routine_id, str(self.request.id))
    chaos_effects.ended(row)


@app.task(name="chaos.tracked", bind=True, acks_late=False)
def tracked(self: Any, routine_id: str, seconds: float) -> str:
    row = chaos_effects.started("tracked", routine_id, str(self.request.id))
    time.sleep(seconds)
    chaos_effects.ended(row)
    return routine_id


@task_success.connect(weak=False)
def _tick_done(sender: Any = None, result: Any = None, **_: Any) -> None:
    if getattr(sender, "name", None) == TICK_TASK and isinstance(result, dict) and "at" in result:
        chaos_effects.tick_done(str(result["at"]), int(result.get("claimed", 0)))


@after_task_publish.connect(weak=False)
def _sent(sender: Any = None, headers: Any = None, **_: Any) -> None:
    if isinstance(sender, str) and sender.startswith("chaos.") and isinstance(headers, dict):
        chaos_effects.sent(str(headers.get("id")), sender)


@task_prerun.connect(weak=False)
def _took(sender: Any = None, task_id: Any = None, args: Any = None, kwargs: Any = None, **_: Any) -> None:
    name = getattr(sender, "name", None)
    values = list(args or ()) + list((kwargs or {}).values())
    request = None if task_id is None else str(task_id)
    if name in (RUN_TASK, COLLECT_TASK) and len(values) == 4:
        chaos_effects.took(["/".join(map(str, values))], str(name), request)
    elif name == RUN_MANY_TASK and values:
        chaos_effects.took(["/".join(map(str, fire[:4])) for fire in values[0]], str(name), request)  # key, expires


install(app)
