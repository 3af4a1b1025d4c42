"""A small Celery fleet that adopted alma-schedule: its own app, two tasks and a ``beat_schedule``.

docker-compose.yml builds it into the image (``/app/fleet``) and runs it: a one-shot
``alma-schedule -A fleet import-beat fleet:app acme/ops --apply`` turns the ``beat_schedule`` into
routines (again at every ``up``: nothing new, changed entries updated), the fleet's own workers
serve our queues and its ``celery`` queue, and ``alma-schedule -A fleet clock run`` is the clock.

The broker and result backend are Celery's own settings (``CELERY_BROKER_URL`` and
``CELERY_RESULT_BACKEND`` override the defaults below, as Celery reads them); alma-schedule's are
``alma_*`` keys of ``app.conf`` or ``ALMA_*`` variables (compose sets ``ALMA_DATABASE_URL``).
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
    # The schedule stays here, in the fleet's code: `import-beat --apply` keeps the routines in step.
    beat_schedule={
        "heartbeat": {"task": "fleet.tasks.heartbeat", "schedule": 60.0},
        "daily-report": {
            "task": "fleet.tasks.report",
            "schedule": crontab(minute=30, hour=2),
            "kwargs": {"period": "day"},
        },
    },
)

# beat_clock=True: a `celery -A fleet beat` started by mistake refuses (exit 1, naming the two
# entries above), since they are routines now and would run twice. The clock here is
# `alma-schedule -A fleet clock run`; to make beat the clock, move the entries out first.
install(app, beat_clock=True)

from fleet import tasks  # noqa: E402,F401  (registers the fleet's tasks on `app`)
