"""The Celery tasks, bound to an app: thin calls into the engine.

* ``alma_schedule.tick(now=None, woken_for=None)``: ``Scheduler.tick``; returns the small report
  dict (with ``woken_for``, the instant a following clock woke for, which it also logs).
* ``alma_schedule.run(org, uid, routine_id, run_id)``: ``Scheduler.execute`` (``ignore_result=True``,
  soft limit = ``run_time_limit``, hard limit = soft + 30 s); the start CAS writes the request id
  as the run's owner, and the finish is retried with ``time.sleep`` while the store is away.
* ``alma_schedule.collect(org, uid, routine_id, collect_run_id)``: ``Scheduler.collect``; collects
  only that run and never submits (``ignore_result=True``, its own limits).
* ``alma_schedule.run_many(fires)``: several claimed fires packed by the dispatcher for a large
  tick, each executed on its own (:mod:`alma_schedule.tasks.batch`); soft limit =
  ``run_time_limit + run_batch_budget``.

Every task pins what the fleet's app-wide defaults must not change (:data:`PINNED`):
``acks_late=False``, ``reject_on_worker_lost=False``, ``retry_on_worker_lost=False`` (a run is never
redelivered after its effect may have happened), ``serializer='json'``, and the ``Request`` and
``Strategy`` of :mod:`alma_schedule.tasks.poison` (a message that is not a well-formed call of the
task is refused and dead-lettered, never crashes the worker). Time limits come from
settings, which a fleet's app reads only in a worker: :func:`apply_limits` sets them on the task
objects, from the worker bootstep (or at once when ``install`` was given settings).

The run and collect tasks pass no ``now`` to the engine: it starts at ``settings.clock()`` and
finishes at the clock read again after the runner returned, so the ledger's durations are real (and
a simulated clock stays simulated). Times cross the message boundary as ISO strings. At the
boundary ``now = min(given, worker clock)``: a clock that runs ahead never makes a tick claim early.
Every task reads its composition (store, registry, schedule) lazily, once per process. Tasks are
registered with ``shared=False`` so they never leak onto other apps of the process.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, TICK_TASK, RunKey
from alma_schedule.model.time import trusted_now
from alma_schedule.policies.blocked import HARD_LIMIT_GRACE as HARD_LIMIT
from alma_schedule.policies.ownership import owner_of
from alma_schedule.tasks.composition import AlmaTasks, Composition
from alma_schedule.tasks.metrics import observe_run, observe_tick
from alma_schedule.waker import wait_for_instant

if TYPE_CHECKING:
    from celery import Celery, Task

    from alma_schedule.settings import Settings

log = logging.getLogger("alma_schedule.tick")

#: Seconds between a task's soft time limit and its hard one (the policy's, ``runs stuck`` shows it).
HARD_LIMIT_GRACE = HARD_LIMIT.total_seconds()


def parse_instant(name: str, value: str) -> datetime:
    """An ISO-8601 instant with an offset (``Z`` accepted); anything else is :class:`InvalidInput`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be an ISO-8601 string, not {type(value).__name__}")
    try:
        given = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name} {value!r} is not an ISO-8601 instant") from None
    if given.tzinfo is None:
        raise InvalidInput(f"{name} {value!r} has no UTC offset")
    return given


def parse_now(value: str | None, settings: Settings) -> datetime:
    """``min(given, worker time)`` (:func:`trusted_now` with tolerance 0); the worker's time when
    ``value`` is None. ``value`` is :func:`parse_instant`'s form."""
    given = None if value is None else parse_instant("now", value)
    return trusted_now(given, settings.clock, timedelta(0))


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

    @app.task(**options(TICK_TASK))
    def tick(now: str | None = None, woken_for: str | None = None) -> dict[str, Any]:
        """One tick: claim the due fires, dispatch them, re-send, poll, and report (a small dict).

        ``woken_for``: the instant a following clock woke for; a tick that arrives before it (by
        at most ``clock_tolerance``) waits for it once, then claims at the worker's clock."""
        settings = composition.settings
        woke = None if woken_for is None else parse_instant("woken_for", woken_for)
        if woke is not None and now is None:
            at = wait_for_instant(woke, settings.clock, settings.clock_tolerance)
        else:
            at = parse_now(now, settings)
        began = time.monotonic()
        report = composition.schedule().tick(now=at)
        observe_tick(report, time.monotonic() - began)
        result = report.to_dict()
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
    def collect(self: Task, org: str, uid: str, routine_id: str, collect_run_id: str) -> dict[str, Any]:
        """Poll (and on a terminal status, deliver) exactly the run ``collect_run_id``; never submits.
        The collecting CAS writes this request as the owner; the finish from it is retried."""
        key = RunKey(org, uid, routine_id, collect_run_id)
        owner = owner_of(self.request.id) if self.request.id else None
        # no now: the finish reads the clock after the runner
        record = composition.schedule().collect(key, owner=owner, sleep=time.sleep)
        return {"run": str(key), "state": record.state, "reason": record.reason}

    @app.task(**options(RUN_MANY_TASK, ignore_result=True), bind=True)
    def run_many(self: Task, fires: list[list[str]]) -> dict[str, Any]:
        """Execute packed fires one by one (each owned by ``<request id>/<key>``); re-send the
        unstarted ones after ``run_batch_budget``."""
        from alma_schedule.tasks.batch import run_batch

        return run_batch(composition, fires, request_id=self.request.id)

    return AlmaTasks(tick=tick, run=run, collect=collect, run_many=run_many)
