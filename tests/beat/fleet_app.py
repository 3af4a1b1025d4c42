"""A test fleet: Celery apps with real ``beat_schedule`` shapes and a few tasks.

``app`` is what ``alma-schedule import-beat tests.beat.fleet_app:app`` reads (timezone
Europe/Paris, ``enable_utc`` left at its default). ``local_app`` has ``enable_utc=False`` with a
timezone; ``naive_app`` has ``enable_utc=False`` and no timezone (Celery then reads crontabs in the
system local zone). :func:`make_worker_app` builds a fresh app with the same tasks for worker tests
(broker and result backend given), and :func:`e2e_app` the three-task fleet of the end-to-end test.

The tasks record each execution in Redis (``LPUSH fleet:ran <name>:<task id>``) when the app's
``fleet_record_url`` is set, so a test can count how often each fleet task really ran.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from celery import Celery
from celery.schedules import BaseSchedule, crontab, schedstate, schedule, solar


class FleetError(Exception):
    """What ``fleet.boom`` raises."""


class BusinessHours(BaseSchedule):
    """A custom schedule class (as fleets write them): due every 10 minutes, 9:00-17:00."""

    def is_due(self, last_run_at: datetime) -> schedstate:
        now = self.now()
        due = 9 <= now.hour < 17 and (now - last_run_at) >= timedelta(minutes=10)
        return schedstate(due, 60.0)

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        return timedelta(minutes=1)


def _record(app: Celery, name: str, task_id: str | None) -> None:
    url = app.conf.get("fleet_record_url")
    if not url:
        return
    import redis

    r = redis.Redis.from_url(url)
    try:
        r.rpush("fleet:ran", f"{name}:{task_id}")
    finally:
        r.close()


def define_tasks(app: Celery) -> None:
    """The fleet's tasks, registered on ``app`` only (``shared=False``)."""

    @app.task(name="fleet.add", bind=True, shared=False)
    def add(self: Any, x: int = 1, y: int = 1) -> int:
        _record(app, "fleet.add", self.request.id)
        return x + y

    @app.task(name="fleet.boom", bind=True, shared=False)
    def boom(self: Any) -> None:
        _record(app, "fleet.boom", self.request.id)
        raise FleetError("the fleet task failed on purpose")

    @app.task(name="fleet.ping", bind=True, shared=False)
    def ping(self: Any, label: str = "ping") -> str:
        _record(app, "fleet.ping", self.request.id)
        return label

    @app.task(name="fleet.quiet", bind=True, shared=False, ignore_result=True)
    def quiet(self: Any) -> None:
        _record(app, "fleet.quiet", self.request.id)


BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # crontab with a step, a range and day names: converts as written
    "reports-weekdays": {
        "task": "fleet.add",
        "schedule": crontab(minute="*/15", hour="9-17", day_of_week="mon-fri"),
        "args": (2, 3),
    },
    # DOM + DOW both restricted: Celery means "the first Monday"; cron would mean "1-7 or Mondays"
    "first-monday": {
        "task": "fleet.add",
        "schedule": crontab(minute=0, hour=7, day_of_month="1-7", day_of_week="monday"),
    },
    # month names and a day-of-month list; DOW left '*': exact
    "quarter-close": {
        "task": "fleet.ping",
        "schedule": crontab(minute=30, hour=6, day_of_month="1,15", month_of_year="jan,apr,jul,oct"),
        "kwargs": {"label": "close"},
    },
    # a Celery-only form: a wrap-around day range and a full day name
    "weekend-sweep": {
        "task": "fleet.ping",
        "schedule": crontab(minute=0, hour="*/6", day_of_week="fri-mon"),
    },
    # full DOW written as a range next to a restricted DOM: exact (the full field becomes '*')
    "month-start": {
        "task": "fleet.add",
        "schedule": crontab(minute=5, hour=0, day_of_month="1-3", day_of_week="0-6"),
    },
    # timedelta with send options
    "sync": {
        "task": "fleet.add",
        "schedule": timedelta(minutes=5),
        "kwargs": {"x": 10, "y": 20},
        "options": {"queue": "fleet.sync", "priority": 5, "expires": 240},
    },
    # whole float seconds: fine
    "heartbeat": {"task": "fleet.ping", "schedule": 30.0, "options": {"expires": 25}},
    # fractional seconds: refused
    "jitter": {"task": "fleet.ping", "schedule": 2.5},
    # schedule(run_every=...)
    "hourly": {"task": "fleet.ping", "schedule": schedule(run_every=timedelta(hours=1))},
    # solar: converts to {"solar": "sunset", "lat": ..., "lon": ...}
    "lights": {"task": "fleet.ping", "schedule": solar("sunset", 48.8566, 2.3522)},
    # a custom schedule class: refused
    "office": {"task": "fleet.ping", "schedule": BusinessHours()},
    # a send option task routines do not carry: refused
    "routed": {"task": "fleet.ping", "schedule": 60, "options": {"routing_key": "elsewhere"}},
    # a task name the app does not know: refused
    "ghost": {"task": "fleet.nope", "schedule": 60},
}


def _base_app(main: str, **conf: Any) -> Celery:
    app = Celery(main, broker="memory://", set_as_current=False)
    app.conf.update(task_serializer="json", accept_content=["json"], result_serializer="json", **conf)
    define_tasks(app)
    return app


app = _base_app("fleet", timezone="Europe/Paris", beat_schedule=BEAT_SCHEDULE)

local_app = _base_app(
    "fleet-local",
    enable_utc=False,
    timezone="America/New_York",
    beat_schedule={
        "nightly": {"task": "fleet.add", "schedule": crontab(minute=30, hour=2)},
        "every-10s": {"task": "fleet.ping", "schedule": 10},
    },
)

naive_app = _base_app(
    "fleet-naive",
    enable_utc=False,
    beat_schedule={"nightly": {"task": "fleet.add", "schedule": crontab(minute=30, hour=2)}},
)


def make_worker_app(broker: str, backend: str | None, *, record_url: str | None = None, **conf: Any) -> Celery:
    """A fresh fleet app on a real broker (and result backend), with the fleet's tasks."""
    fresh = Celery("fleet-worker", broker=broker, backend=backend, set_as_current=False)
    fresh.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        broker_connection_retry_on_startup=False,
        fleet_record_url=record_url,
        **conf,
    )
    define_tasks(fresh)
    return fresh


E2E_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "add-every-2-min": {"task": "fleet.add", "schedule": crontab(minute="*/2"), "args": (1, 2)},
    "ping-every-3-min": {"task": "fleet.ping", "schedule": timedelta(minutes=3)},
    "boom-every-5-min": {"task": "fleet.boom", "schedule": crontab(minute="*/5")},
}


def e2e_app(broker: str, backend: str, record_url: str) -> Celery:
    """The end-to-end fleet: three tasks (one always fails), their beat_schedule, a result backend."""
    return make_worker_app(broker, backend, record_url=record_url, beat_schedule=E2E_BEAT_SCHEDULE)
