"""Test-only runner kinds for subprocess workers (never shipped in the package).

How a subprocess worker gets them: :func:`celery_support.runner_path` writes a tiny
``alma_e2e_runners-0.dist-info`` (METADATA + entry_points.txt) into a temp dir and puts that dir and
this one on ``PYTHONPATH``. The package's :class:`KindRegistry` then finds the kinds through its
ordinary ``alma_schedule.runners`` entry point group: no ``ALMA_*`` variable, no code path that
exists only for tests.

Kinds:
* ``count``: inserts one row into ``e2e_effects`` (the test's own table, in the database of
  ``settings.database_url``) per run, then optionally sleeps ``definition["sleep"]`` seconds.
  A duplicate execution would insert a second row (no unique constraint: the test counts).
  ``definition["gate"]``: a file path; the run then lasts until that file exists (the test ends it).
  ``"ignore_soft": true`` keeps sleeping through Celery's soft time limit (a runner stuck in a
  call: only the hard limit ends it).

Worker hook (only where ``E2E_KILL_ONCE`` names an existing file): the first task that enters
``task_prerun`` deletes the file and SIGKILLs its worker (parent, then itself) -- a worker dying
between dispatch and ``running``.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import psycopg
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import task_prerun

from alma_schedule.model import Routine, RunHandle, RunResult

EFFECTS_DDL = """
CREATE TABLE IF NOT EXISTS e2e_effects (
    id bigserial PRIMARY KEY,
    org text NOT NULL, uid text NOT NULL, routine_id text NOT NULL, run_id text NOT NULL,
    pid integer NOT NULL, at timestamptz NOT NULL DEFAULT now()
)
"""


def libpq_url(database_url: str) -> str:
    return database_url.replace("postgresql+psycopg://", "postgresql://", 1)


class CountRunner:
    """Writes its side effect to ``e2e_effects`` (autocommit, one row per execution)."""

    def __init__(self, database_url: str) -> None:
        self.url = libpq_url(database_url)
        self._conn: psycopg.Connection[Any] | None = None
        self._pid = -1

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._pid != os.getpid() or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True)
            self._pid = os.getpid()
        return self._conn

    def validate(self, routine: Routine) -> None:
        return None

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        k = handle.key
        self._connection().execute(
            "INSERT INTO e2e_effects (org, uid, routine_id, run_id, pid) VALUES (%s, %s, %s, %s, %s)",
            (k.org, k.uid, k.routine_id, k.run_id, os.getpid()),
        )
        pause = float(routine.definition.get("sleep", 0) or 0)
        end = time.monotonic() + pause
        while (left := end - time.monotonic()) > 0:
            try:
                time.sleep(left)
            except SoftTimeLimitExceeded:  # "ignore_soft": a runner stuck past the soft limit
                if not routine.definition.get("ignore_soft"):
                    raise
        gate = routine.definition.get("gate")
        if gate:  # a slow run the test ends: wait (at most two minutes) until the gate file exists
            deadline = time.monotonic() + 120
            while not os.path.exists(str(gate)) and time.monotonic() < deadline:
                time.sleep(0.05)
        return RunResult.completed()


def count_factory(settings: Any) -> CountRunner:
    """Entry point ``count``: needs a PostgreSQL ``database_url``."""
    from alma_schedule.errors import ConfigurationError

    if not settings.database_url.startswith("postgresql"):
        raise ConfigurationError("the count kind needs ALMA_DATABASE_URL on PostgreSQL")
    return CountRunner(settings.database_url)


def needs_webhook_factory(settings: Any) -> Any:
    """Entry point ``hooked``: a kind this configuration cannot serve without ALMA_WEBHOOK_URL."""
    from alma_schedule.errors import ConfigurationError

    if not settings.webhook_url:
        raise ConfigurationError("ALMA_WEBHOOK_URL is not set")
    return CountRunner(settings.database_url)


def create_effects_table(database_url: str) -> None:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(EFFECTS_DDL)


def _is_celery(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\x00")
    except OSError:
        return False
    return b"worker" in argv and b"alma_schedule.celery" in argv


@task_prerun.connect(weak=False)
def _kill_once(**_: Any) -> None:
    marker = os.environ.get("E2E_KILL_ONCE")
    if not marker or not os.path.exists(marker):
        return
    try:
        os.unlink(marker)
    except FileNotFoundError:
        return
    parent = os.getppid()
    if _is_celery(parent):  # a prefork child: take its worker down first
        os.kill(parent, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
