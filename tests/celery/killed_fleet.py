"""A tiny fleet app for the killed-run tests (never shipped): one task, and two hooks of the
fleet's own code that hold a pool child mid-run so the test can SIGKILL it.

The subprocess worker reaches it as ``ALMA_CELERY_APP=killed_fleet:app`` (this directory is on its
``PYTHONPATH``, see ``celery_support.runner_path``); its broker and result backend come from
``KILLED_FLEET_BROKER``. A hook acts only in a prefork pool child, once: when the file its variable
names exists, the hook deletes it and sleeps (until the test kills the child).

* ``KILLED_HANG_SEND``: ``before_task_publish`` of ``killed_fleet.ping``: the run of an UNTRACKED
  ``task`` routine, after its start CAS and before its one send;
* ``KILLED_HANG_IMPORT``: ``import_modules`` of this app, which the ``task`` runner sends when it
  first loads the app's task modules in a child: a TRACKED run after its start CAS and before its
  submit (the run is still ``running``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from celery import Celery
from celery.signals import before_task_publish, import_modules

BROKER = os.environ.get("KILLED_FLEET_BROKER", "memory://")

app = Celery("killed_fleet", broker=BROKER, backend=BROKER if BROKER.startswith("redis") else None)
app.conf.update(accept_content=["json"], task_serializer="json", result_expires=86_400)


@app.task(name="killed_fleet.ping")
def ping() -> str:
    return "pong"


def _in_pool_child() -> bool:
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            argv = f.read().split(b"\x00")
    except OSError:
        return False
    return b"worker" in argv


def _hold(variable: str) -> None:
    marker = os.environ.get(variable)
    if not marker or not os.path.exists(marker) or not _in_pool_child():
        return
    try:
        os.unlink(marker)
    except FileNotFoundError:
        return
    time.sleep(300)  # until the test's SIGKILL


@before_task_publish.connect(weak=False)
def _hold_the_send(sender: Any = None, **_: Any) -> None:
    if sender == "killed_fleet.ping":
        _hold("KILLED_HANG_SEND")


@import_modules.connect(weak=False)
def _hold_the_import(sender: Any = None, **_: Any) -> None:
    if sender is app:
        _hold("KILLED_HANG_IMPORT")
