"""The demo's tiny Celery fleet: three tasks and a ``beat_schedule``, on kombu's in-memory broker.

docs/architecture.md, section "The modules, in detail" (cli/demo_fleet.py).
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

from alma_schedule.errors import missing_extra

try:
    from celery import Celery
    from celery.schedules import crontab
except ModuleNotFoundError as exc:  # a bare install: no Celery
    raise missing_extra(exc, "celery", "the demo's fleet app") from None

#: Executions of the fleet's tasks on the worker, by task id (the id is derived from the run key).
EXECUTED: Counter[str] = Counter()
_LOCK = threading.Lock()

app = Celery("demo_fleet", broker="memory://", set_as_current=False)
app.conf.update(
    timezone="Europe/London",  # beat reads crontabs in the app's zone; so does import-beat
    task_serializer="json",
    accept_content=["json"],
    broker_transport_options={"polling_interval": 0.05},
    beat_schedule={
        "refresh-cache": {"task": "fleet.refresh_cache", "schedule": timedelta(seconds=30)},
        "send-reminders": {
            "task": "fleet.send_reminders",
            "schedule": crontab(minute="*/15"),
            "kwargs": {"channel": "email"},
        },
        "nightly-report": {"task": "fleet.build_report", "schedule": crontab(minute=30, hour=1), "args": ["daily"]},
        # Celery ANDs the two day fields ("the first Monday"); cron ORs them: refused, it stays in beat.
        "first-monday-report": {
            "task": "fleet.build_report",
            "schedule": crontab(minute=0, hour=7, day_of_month="1-7", day_of_week="mon"),
            "args": ["monthly"],
        },
    },
)


def _ran(task: Any) -> None:
    with _LOCK:
        EXECUTED[str(task.request.id)] += 1


@app.task(name="fleet.refresh_cache", bind=True, shared=False)
def refresh_cache(self: Any) -> str:
    _ran(self)
    return "refreshed"


@app.task(name="fleet.send_reminders", bind=True, shared=False)
def send_reminders(self: Any, channel: str) -> str:
    _ran(self)
    return f"sent by {channel}"


@app.task(name="fleet.build_report", bind=True, shared=False)
def build_report(self: Any, period: str) -> str:
    _ran(self)
    return f"{period} report"


def executed() -> Counter[str]:
    """A copy of :data:`EXECUTED`."""
    with _LOCK:
        return Counter(EXECUTED)
