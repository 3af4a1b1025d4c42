"""A small Celery fleet that adopted alma-schedule in the README's three steps: its own app, two tasks and
a ``beat_schedule`` kept here, in code.

docker-compose.yml builds it into the image (``/app/fleet``) and runs it: ``alma-schedule -A fleet
migrate`` once, the fleet's worker (``celery -A fleet worker -n worker@%h``: no ``-Q``, so it also
serves our runs and collects), the tick worker (``-Q alma.tick -c 1 -n tick@%h``) and ``celery -A
fleet beat``, the clock, whose start syncs the ``beat_schedule`` into routines of scope ``beat/fleet``.

The broker and result backend are Celery's own settings (``CELERY_BROKER_URL`` and
``CELERY_RESULT_BACKEND`` override the defaults below, as Celery reads them); alma-schedule's are
``alma_*`` keys of ``app.conf`` (``ALMA_*`` variables win over them).
"""

from __future__ import annotations

from celery import Celery
from celery.schedules import crontab

from alma_schedule.celery import install

app = Celery("fleet")
app.conf.update(
    broker_url="redis://localhost:6379/0",
    result_backend="redis://localhost:6379/1",
    timezone="UTC",
    # The schedule stays here, in the fleet's code: beat's start syncs it into routines (beat/fleet).
    beat_schedule={
        "heartbeat": {"task": "fleet.tasks.heartbeat", "schedule": 60.0},
        "daily-report": {
            "task": "fleet.tasks.report",
            "schedule": crontab(minute=30, hour=2),
            "kwargs": {"period": "day"},
        },
    },
)

# Step 2 of the README: our store (PostgreSQL, compose's `postgres` service) and the one install line.
# beat_clock=True: `celery -A fleet beat` is the clock, and its start syncs beat_schedule (it runs none
# of the entries it converted itself, so nothing runs twice, from any number of beats).
app.conf.alma_database_url = "postgresql+psycopg://alma:alma@postgres:5432/alma"
install(app, beat_clock=True)

from fleet import tasks  # noqa: E402,F401  (registers the fleet's tasks on `app`)
