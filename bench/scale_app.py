"""The Celery app a real prefork ``celery worker`` of ``bench/scale.py`` serves (its tick task)."""

from __future__ import annotations

import os

from scale_systems import make_app

app = make_app(os.environ["ALMA_SCALE_DB_URL"], os.environ["ALMA_SCALE_REDIS"])
