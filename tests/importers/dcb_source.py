"""Run as a script (its own process: Django's global state stays out of pytest): configure Django on
the database given, run django-celery-beat's migrations, create periodic tasks through its ORM, and
print what was stored as JSON (name -> fields, read back through the ORM).

Usage: python dcb_source.py '{"engine": "postgresql"|"sqlite3"|"mysql", "name": ..., ...}' BASE_ISO
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from typing import Any


def configure(db: dict[str, Any]) -> None:
    import django
    from django.conf import settings

    if db["engine"] == "mysql":
        import pymysql

        pymysql.version_info = (2, 2, 7, "final", 0)  # Django asks mysqlclient's version
        pymysql.install_as_MySQLdb()
    settings.configure(
        INSTALLED_APPS=["django_celery_beat"],
        DATABASES={
            "default": {
                **{k.upper(): v for k, v in db.items() if k != "engine"},
                "ENGINE": f"django.db.backends.{db['engine']}",
            }
        },
        USE_TZ=True,
        TIME_ZONE="UTC",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()


def populate(base: datetime) -> dict[str, Any]:
    from django.core.management import call_command
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    call_command("migrate", "django_celery_beat", verbosity=0)
    hourly = CrontabSchedule.objects.create(minute="30", hour="*", timezone="Europe/Paris")
    weekdays = CrontabSchedule.objects.create(minute="0", hour="9", day_of_week="1-5", timezone="Europe/Paris")
    ten = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.MINUTES)
    day = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.DAYS)
    clock = ClockedSchedule.objects.create(clocked_time=base + timedelta(days=2))
    sun = SolarSchedule.objects.create(event="sunrise", latitude="48.8566", longitude="2.3522")
    hour = base.replace(minute=0, second=0, microsecond=0)
    PeriodicTask.objects.create(
        name="hourly-report",
        task="proj.report",
        crontab=hourly,
        args=json.dumps([1, 2]),
        kwargs=json.dumps({"team": "ops"}),
        queue="reports",
        priority=5,
        last_run_at=hour + timedelta(minutes=30),
    )
    PeriodicTask.objects.create(
        name="every-ten",
        task="proj.cleanup",
        interval=ten,
        expire_seconds=60,
        last_run_at=base - timedelta(minutes=3),
    )
    PeriodicTask.objects.create(
        name="weekday-digest", task="proj.report", crontab=weekdays, enabled=False, last_run_at=base - timedelta(days=1)
    )
    PeriodicTask.objects.create(
        name="once-daily",
        task="proj.cleanup",
        interval=day,
        one_off=True,
        start_time=base - timedelta(days=3),
        expires=base + timedelta(days=30),
        last_run_at=None,
    )
    PeriodicTask.objects.create(name="at-launch", task="proj.report", clocked=clock, one_off=True)
    PeriodicTask.objects.create(name="sunrise", task="proj.report", solar=sun, last_run_at=base - timedelta(hours=5))
    PeriodicTask.objects.create(
        name="routed", task="proj.report", interval=ten, queue="reports", routing_key="other", last_run_at=base
    )
    PeriodicTask.objects.create(name="in-code", task="proj.report", interval=ten, last_run_at=base)
    out: dict[str, Any] = {}
    for t in PeriodicTask.objects.all():
        out[t.name] = {
            "task": t.task,
            "enabled": t.enabled,
            "one_off": t.one_off,
            "args": json.loads(t.args),
            "kwargs": json.loads(t.kwargs),
            "queue": t.queue,
            "priority": t.priority,
            "expire_seconds": t.expire_seconds,
            **{
                k: None if getattr(t, k) is None else getattr(t, k).isoformat()
                for k in ("start_time", "expires", "last_run_at", "date_changed")
            },
        }
    return out


if __name__ == "__main__":
    configure(json.loads(sys.argv[1]))
    print(json.dumps(populate(datetime.fromisoformat(sys.argv[2]))))
