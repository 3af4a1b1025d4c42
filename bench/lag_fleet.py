"""The fleet of ``bench/lag.py``: a Celery project as a user has one, with one no-op task.

Every process of a lag run (``celery -A lag_fleet worker``, ``celery -A lag_fleet beat``,
``alma-schedule -A lag_fleet clock run``) imports this module; ``LAG_SYSTEM`` says which scheduler
the fleet runs:

* ``celery_beat``: ``app.conf.beat_schedule`` read from the JSON file ``LAG_SPEC`` (written by the
  harness), Celery's own ``PersistentScheduler``;
* ``redbeat``: ``beat_scheduler = redbeat.RedBeatScheduler`` on the bench Redis (the harness loads
  the entries into Redis before beat starts);
* ``alma_beat``: ``install(app, beat_clock=True)`` with DEFAULT settings (only the store's URL, the
  README's step 2): ``celery -A lag_fleet beat`` is the clock;
* ``alma_clock``: ``install(app)``: ``alma-schedule -A lag_fleet clock run`` is the clock.

The fleet app has a Redis result backend (a common fleet's setup: where ticks leave
``celery-task-meta-*`` keys) and sends ``task-sent`` events (``task_send_sent_event``, as every
system's app does in ``bench/compare.py``). What the bench records (to Redis lists, after the
instant it reads, so off its own measurement):

* ``bench.noop(name)``: ``time.time()`` at its start, its task id, and when it was published (the
  ``lag_pub`` header stamped by ``before_task_publish`` in whichever process sent it: beat, RedBeat's
  beat, our run worker): ``lag:starts``;
* ``alma_schedule.tick`` (alma only): its start and end and its report's ``at`` and ``claimed``:
  ``lag:ticks``;
* ``bench.busy``: 2 s of sleep (the busy fleet's own work).
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any

import redis
from celery import Celery, signals

NOOP, BUSY, TICK = "bench.noop", "bench.busy", "alma_schedule.tick"
SYSTEMS = ("celery_beat", "redbeat", "alma_beat", "alma_clock")
_ticks: dict[str, float] = {}
_redis: list[redis.Redis] = []


def _r() -> redis.Redis:
    if not _redis:
        _redis.append(redis.Redis.from_url(os.environ["LAG_REDIS"]))
    return _redis[0]


def beat_schedule(spec: dict[str, Any]) -> dict[str, Any]:
    """celery beat's entries for the harness's routines: ``cron`` every minute, ``every`` N seconds,
    ``never`` (a yearly crontab outside any window)."""
    from celery.schedules import crontab

    out: dict[str, Any] = {}
    for name, (kind, period, _phase) in spec.items():
        if kind == "cron":
            sched: Any = crontab()
        elif kind == "never":
            sched = crontab(minute=0, hour=0, day_of_month=1, month_of_year=1)
        else:
            sched = timedelta(seconds=period)
        out[name] = {"task": NOOP, "schedule": sched, "args": [name]}
    return out


def make_app(system: str, redis_url: str, db_url: str | None = None) -> Celery:
    """The fleet's app for ``system`` (the harness makes one per run to register routines)."""
    if system not in SYSTEMS:
        raise SystemExit(f"LAG_SYSTEM must be one of {', '.join(SYSTEMS)}, not {system!r}")
    fleet = Celery("lag_fleet", broker=redis_url, backend=redis_url, set_as_current=False)
    fleet.conf.broker_connection_retry_on_startup = True
    fleet.conf.task_send_sent_event = True

    @fleet.task(name=NOOP, ignore_result=True, bind=True)
    def noop(self: Any, name: str) -> None:
        start = time.time()
        pub = getattr(self.request, "lag_pub", None) or 0.0
        _r().rpush("lag:starts", f"{name} {self.request.id} {float(pub):.6f} {start:.6f}")

    @fleet.task(name=BUSY, ignore_result=True)
    def busy() -> None:
        time.sleep(2.0)

    if system == "celery_beat" and os.environ.get("LAG_SPEC"):
        with open(os.environ["LAG_SPEC"]) as f:
            fleet.conf.beat_schedule = beat_schedule(json.load(f))
    elif system == "redbeat":
        fleet.conf.redbeat_redis_url = redis_url
        fleet.conf.beat_scheduler = "redbeat.RedBeatScheduler"
    elif system.startswith("alma"):
        from alma_schedule.celery import install

        fleet.conf.alma_database_url = db_url or os.environ["LAG_DB"]
        install(fleet, beat_clock=system == "alma_beat")
    return fleet


@signals.before_task_publish.connect
def _stamp(sender: Any = None, headers: Any = None, **_: Any) -> None:
    if sender == NOOP and isinstance(headers, dict):
        headers["lag_pub"] = time.time()


@signals.task_prerun.connect
def _tick_start(task_id: Any = None, task: Any = None, **_: Any) -> None:
    if getattr(task, "name", None) == TICK:
        _ticks[str(task_id)] = time.time()


@signals.task_postrun.connect
def _tick_end(task_id: Any = None, task: Any = None, retval: Any = None, **_: Any) -> None:
    if getattr(task, "name", None) != TICK:
        return
    end, report = time.time(), retval if isinstance(retval, dict) else {}
    row = {"start": _ticks.pop(str(task_id), end), "end": end, "at": report.get("at"), "claimed": report.get("claimed")}
    _r().rpush("lag:ticks", json.dumps(row))


if os.environ.get("LAG_SYSTEM"):
    app = make_app(os.environ["LAG_SYSTEM"], os.environ["LAG_REDIS"])
