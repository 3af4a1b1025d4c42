"""The Celery tasks, bound to an app: thin calls into the engine.

docs/architecture.md, section "The modules, in detail" (tasks/definitions.py).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, TICK_TASK, RunKey, RunState
from alma_schedule.model.names import ALERT_TASK
from alma_schedule.model.time import parse_instant as parse_instant
from alma_schedule.model.time import trusted_now
from alma_schedule.policies.blocked import HARD_LIMIT_GRACE as HARD_LIMIT
from alma_schedule.policies.ownership import owner_of
from alma_schedule.run_queue_watch import TickWatch
from alma_schedule.runners.task_tracking import ENDED_RETRIES
from alma_schedule.tasks.alert import define_alert
from alma_schedule.tasks.composition import AlmaTasks, Composition
from alma_schedule.tasks.metrics import observe_run, observe_tick
from alma_schedule.waker import wait_for_instant

if TYPE_CHECKING:
    from celery import Celery, Task

    from alma_schedule.settings import Settings

log = logging.getLogger("alma_schedule.tick")

#: Seconds between a task's soft time limit and its hard one (the policy's, ``runs stuck`` shows it).
HARD_LIMIT_GRACE = HARD_LIMIT.total_seconds()


def parse_now(value: str | None, settings: Settings) -> datetime:
    """``min(given, worker time)`` (:func:`trusted_now` with tolerance 0); the worker's time when
    ``value`` is None. ``value`` is :func:`parse_instant`'s form."""
    given = None if value is None else parse_instant("now", value)
    return trusted_now(given, settings.time_source, timedelta(0))


def limits(soft: timedelta) -> dict[str, float]:
    """Celery ``soft_time_limit`` / ``time_limit`` from one duration (hard = soft + 30 s)."""
    seconds = soft.total_seconds()
    return {"soft_time_limit": seconds, "time_limit": seconds + HARD_LIMIT_GRACE}


#: Task options pinned on each of our tasks, whatever the app's defaults say.
PINNED: dict[str, Any] = {
    "shared": False,
    "acks_late": False,
    "reject_on_worker_lost": False,
    "retry_on_worker_lost": False,
    "serializer": "json",
    # poison messages are refused, never crash the worker (alma_schedule.tasks.poison)
    "Request": "alma_schedule.tasks.poison:CheckedRequest",
    "Strategy": "alma_schedule.tasks.poison:strategy",
}


def task_limits(settings: Settings) -> dict[str, timedelta]:
    """Each task's soft time limit, by task name."""
    return {
        TICK_TASK: settings.tick_time_limit,
        RUN_TASK: settings.run_time_limit,
        COLLECT_TASK: settings.collect_time_limit,
        RUN_MANY_TASK: settings.run_time_limit + settings.run_batch_budget,
        ALERT_TASK: settings.collect_time_limit,
    }


def apply_limits(app: Celery, settings: Settings) -> None:
    """Set each of our task objects' ``soft_time_limit`` / ``time_limit`` from ``settings``."""
    for name, soft in task_limits(settings).items():
        task = app.tasks[name]
        for option, value in limits(soft).items():
            setattr(task, option, value)


def define_tasks(app: Celery, composition: Composition, settings: Settings | None = None) -> AlmaTasks:
    """Register the tick, run and collect tasks on ``app``, each calling into ``composition``.

    ``settings`` given: their time limits are task options at once; else :func:`apply_limits` sets
    them later (the worker bootstep). The tasks read ``composition.settings`` when they run.
    """
    soft = task_limits(settings) if settings is not None else {}

    def options(name: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, **PINNED, **extra, **(limits(soft[name]) if name in soft else {})}

    watch = TickWatch()

    @app.task(**options(TICK_TASK))
    def tick(now: str | None = None, woken_for: str | None = None) -> dict[str, Any]:
        """One tick: claim the due fires, dispatch them, re-send, poll, and report (a small dict).

        ``woken_for``: the instant a following clock woke for; a tick that arrives before it (by
        at most ``clock_tolerance``) waits for it once, then claims at the worker's clock."""
        settings = composition.settings
        woke = None if woken_for is None else parse_instant("woken_for", woken_for)
        if woke is not None and now is None:
            at = wait_for_instant(woke, settings.time_source, settings.clock_tolerance)
        else:
            at = parse_now(now, settings)
        began = time.monotonic()
        schedule = composition.schedule()
        report = schedule.tick(now=at)
        observe_tick(report, time.monotonic() - began)
        result = report.to_dict()
        unconsumed, fresh = watch.line(schedule.store, at, settings)
        if unconsumed is not None:
            result["run_queue"] = unconsumed
            if fresh:
                log.warning("%s", unconsumed)
        if woke is not None:
            result["woken_for"] = woke.isoformat()
            log.info(
                "tick woken for %s at %s: claimed %d (next wake %s)",
                woke.isoformat(),
                at.isoformat(),
                len(report.claimed),
                result.get("next_wake_at"),
            )
        return result

    @app.task(**options(RUN_TASK, ignore_result=True), bind=True)
    def run(self: Task, org: str, uid: str, routine_id: str, run_id: str) -> dict[str, Any]:
        """Execute one claimed fire: ``claimed -> running`` CAS (owner: this request), the runner,
        the terminal write (retried while the store is unreachable)."""
        key = RunKey(org, uid, routine_id, run_id)
        owner = owner_of(self.request.id) if self.request.id else None
        # no now: the finish reads the clock after the runner
        record = composition.schedule().execute(key, owner=owner, sleep=time.sleep)
        observe_run(record, started_here=record.started_at is not None)
        return {"run": str(key), "state": record.state, "reason": record.reason}

    @app.task(**options(COLLECT_TASK, ignore_result=True), bind=True)
    def collect(
        self: Task, org: str, uid: str, routine_id: str, collect_run_id: str, ended: bool = False
    ) -> dict[str, Any]:
        """Poll (and on a terminal status, deliver) exactly the run ``collect_run_id``; never submits.
        The collecting CAS writes this request as the owner; the finish from it is retried.
        ``ended``: sent by the tracked task's own link as it ended (a fixed delay); a result not
        stored yet is looked for again, a second apart, up to ``ENDED_RETRIES`` times."""
        key = RunKey(org, uid, routine_id, collect_run_id)
        owner = owner_of(self.request.id) if self.request.id else None
        # no now: the finish reads the clock after the runner
        record = composition.schedule().collect(key, owner=owner, sleep=time.sleep)
        if ended and record.state == RunState.SUBMITTED and self.request.retries < ENDED_RETRIES:
            raise self.retry(countdown=1, max_retries=ENDED_RETRIES)
        return {"run": str(key), "state": record.state, "reason": record.reason}

    @app.task(**options(RUN_MANY_TASK, ignore_result=True), bind=True)
    def run_many(self: Task, fires: list[list[str]]) -> dict[str, Any]:
        """Execute packed fires one by one (each owned by ``<request id>/<key>``); re-send the
        unstarted ones after ``run_batch_budget``."""
        from alma_schedule.tasks.batch import run_batch

        return run_batch(composition, fires, request_id=self.request.id)

    define_alert(app, composition, options)  # the "did not run" alarm's post (tasks/alert.py)
    return AlmaTasks(tick=tick, run=run, collect=collect, run_many=run_many)
