"""The database-backed celery beat schedulers ``bench/compare.py`` measures beside RedBeat and celery beat.

Both are celery's ``Scheduler`` with the schedule in PostgreSQL (a database of their own, created
and dropped here); both run the N entries (every hour; the due ones last ran 2 h before the wall
clock at the reset) and publish every due message to the bench's Redis through the app's real
producer (``apply_entry``: the same path as in ``celery beat``; nothing is replaced).

One tick, for each: ``Scheduler.tick()`` called until it returns a wait (each call sends at most
one due entry; each call also asks the database whether the schedule changed and compares the
whole schedule with its copy, O(N)), then ``sync()``: the write-back of every entry it sent
(last_run_at, total_run_count; one SELECT + UPDATE per entry). The real beat syncs at most every
``beat_sync_every`` / 3 minutes, but it writes each sent entry once either way: the same work per
fire. Untimed, before each tick: the due rows' last_run_at moved back in the database and in the
scheduler's memory, its heap rebuilt. Left out in their favour: django-celery-beat's forced full
re-read of the table every 5 minutes (``_last_full_sync`` is set to the reset instant).

* django-celery-beat: ``django_celery_beat.schedulers.DatabaseScheduler``; Django configured in this
  process (``settings.configure``: the PostgreSQL backend, ``USE_TZ``, ``CONN_MAX_AGE=None``, i.e.
  persistent connections, not Django's default of one connection per request cycle, which would
  reconnect at every ``tick()``), ``migrate`` applied. One database per process (Django is
  configured once), emptied between sizes.
* sqlalchemy-celery-beat: ``sqlalchemy_celery_beat.schedulers.DatabaseScheduler`` over
  ``postgresql+psycopg``; its tables made by its own metadata. Outside a forked process its session
  manager uses SQLAlchemy's ``NullPool`` (its own choice, not configurable: pool options are
  dropped), so every session is a new connection.

A tick still sending past ``DEADLINE_S`` is stopped (:class:`DidNotFinish`; checked after each sent
entry, i.e. between two ``tick()`` calls). The warm-up is not subject to it.
"""

from __future__ import annotations

import atexit
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from compare_systems import System, _incumbent_app

DEADLINE_S = 300.0


class DidNotFinish(Exception):
    """A tick still running at the deadline (it was stopped there)."""


def _create_db(pg_admin: str, prefix: str) -> tuple[str, str]:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    return name, f"{pg_admin.rsplit('/', 1)[0]}/{name}"


def _drop_db(pg_admin: str, name: str) -> None:
    with psycopg.connect(pg_admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


def _due_names(n: int, due: int) -> list[str]:
    if not due:
        return []
    return [f"e{i}" for i in range(0, n, max(1, n // due))][:due]


class _DbBeat(System):
    """The common part: a celery ``Scheduler`` over a table; one tick = tick() until it waits + sync()."""

    def __init__(self, n: int, due: int, redis_url: str, pg_admin: str) -> None:
        self.n, self.due, self.redis_url, self.pg_admin = n, due, redis_url, pg_admin
        self.due_names = _due_names(n, due)

    def _app(self) -> Any:
        app = _incumbent_app(self.redis_url)
        app.conf.timezone = "UTC"
        app.conf.result_expires = None  # no celery.backend_cleanup entry of its own
        return app

    def _move_back(self, old: datetime) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        import copy

        old = datetime.now(UTC) - timedelta(hours=2)
        self._move_back(old)
        sched = self.sched
        for name in self.due_names:
            entry = sched._schedule[name]
            entry.model.last_run_at = old
            entry.last_run_at = old
        sched.populate_heap()
        sched.old_schedulers = copy.copy(sched._schedule)

    def warm(self) -> None:
        """One entry sent and synced (the broker connection, the sessions): a full tick would cost as
        much as a measured one. Not subject to the deadline."""
        saved, self.due_names = self.due_names, ["e0"]
        try:
            self.reset()
            self._tick(None)
        finally:
            self.due_names = saved

    def tick(self) -> int:
        self._tick(DEADLINE_S)
        return self.due  # checked against what reached Redis

    def _tick(self, deadline: float | None) -> None:
        t0 = time.perf_counter()
        while self.sched.tick() <= 0:  # 0: it sent one due entry; call again at once
            if deadline is not None and time.perf_counter() - t0 > deadline:
                raise DidNotFinish(f"did not finish in {deadline / 60:g} min")
        self.sched._do_sync()  # the write-back of the sent entries


_DJANGO: dict[str, str] = {}


def _django(pg_admin: str) -> None:
    """Configure Django once in this process over a database of its own, migrated; dropped at exit."""
    if _DJANGO:
        return
    import django
    from django.conf import settings
    from django.core.management import call_command

    name, _ = _create_db(pg_admin, "alma_bench_djbeat")
    _DJANGO["name"] = name
    info = psycopg.conninfo.conninfo_to_dict(pg_admin)
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql", "NAME": name, "USER": info.get("user", "postgres"),
                "PASSWORD": info.get("password", ""), "HOST": info.get("host", "127.0.0.1"),
                "PORT": str(info.get("port", "5432")), "CONN_MAX_AGE": None,
            }
        },
        INSTALLED_APPS=["django_celery_beat"], USE_TZ=True, TIME_ZONE="UTC",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )  # fmt: skip
    django.setup()
    call_command("migrate", verbosity=0)

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        _drop_db(pg_admin, name)

    atexit.register(drop)


class DjangoBeat(_DbBeat):
    """django-celery-beat's ``DatabaseScheduler`` (PostgreSQL, Django configured in-process)."""

    def setup(self) -> None:
        _django(self.pg_admin)
        from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks
        from django_celery_beat.schedulers import DatabaseScheduler

        self.app = self._app()
        now = datetime.now(UTC)
        every, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.HOURS)
        PeriodicTask.objects.bulk_create(
            (PeriodicTask(name=f"e{i}", task="bench.noop", interval=every, last_run_at=now) for i in range(self.n)),
            batch_size=5000,
        )
        PeriodicTasks.update_changed()
        self.sched = DatabaseScheduler(app=self.app)

    def _move_back(self, old: datetime) -> None:
        from django_celery_beat.models import PeriodicTask

        PeriodicTask.objects.filter(name__in=self.due_names).update(last_run_at=old)
        self.sched._last_full_sync = datetime.now()

    def teardown(self) -> None:
        if not hasattr(self, "sched"):
            return
        from django.db import connection

        self.sched._finalize.cancel()
        with connection.cursor() as cur:
            cur.execute("TRUNCATE django_celery_beat_periodictask, django_celery_beat_periodictasks CASCADE")


class SqlaBeat(_DbBeat):
    """sqlalchemy-celery-beat's ``DatabaseScheduler`` (PostgreSQL through psycopg)."""

    def setup(self) -> None:
        import sqlalchemy as sa
        from sqlalchemy_celery_beat.models import IntervalSchedule
        from sqlalchemy_celery_beat.schedulers import DatabaseScheduler
        from sqlalchemy_celery_beat.session import ModelBase

        self.name, dsn = _create_db(self.pg_admin, "alma_bench_sqlabeat")
        self.dsn = dsn
        uri = dsn.replace("postgresql://", "postgresql+psycopg://", 1)
        engine = sa.create_engine(uri).execution_options(schema_translate_map={"celery_schema": None})
        ModelBase.metadata.create_all(engine)
        engine.dispose()
        now = datetime.now(UTC)
        with psycopg.connect(dsn) as conn:
            sid = conn.execute(
                "INSERT INTO celery_intervalschedule (every, period) VALUES (3600, 'seconds') RETURNING id"
            ).fetchone()[0]  # type: ignore[index]
            discriminator = IntervalSchedule.__name__.lower()
            conn.execute(
                "INSERT INTO celery_periodictask (name, task, args, kwargs, headers, one_off, enabled,"
                " last_run_at, total_run_count, date_changed, description, discriminator, schedule_id)"
                " SELECT 'e' || i, 'bench.noop', '[]', '{}', '{}', false, true, %s, 0, %s, '', %s, %s"
                " FROM generate_series(0, %s - 1) i",
                (now, now, discriminator, sid, self.n),
            )
        self.app = self._app()
        self.sched = DatabaseScheduler(app=self.app, dburi=uri)

    def _move_back(self, old: datetime) -> None:
        with psycopg.connect(self.dsn) as conn:
            conn.execute("UPDATE celery_periodictask SET last_run_at = %s WHERE name = ANY(%s)", (old, self.due_names))

    def teardown(self) -> None:
        if hasattr(self, "sched"):
            self.sched._finalize.cancel()
            self.sched.engine.dispose()
        if hasattr(self, "name"):
            _drop_db(self.pg_admin, self.name)


def contenders(n: int, due: int, redis_url: str, pg_admin: str) -> dict[str, System]:
    return {
        "django_celery_beat": DjangoBeat(n, due, redis_url, pg_admin),
        "sqla_celery_beat": SqlaBeat(n, due, redis_url, pg_admin),
    }


def within_budget(xs: list[float], budget_s: float) -> bool:
    """Another repetition? Always a first one; then while the repetitions so far took under ``budget_s``."""
    return not xs or sum(xs) < budget_s


NAMES = {"django_celery_beat": "django-celery-beat", "sqla_celery_beat": "sqlalchemy-celery-beat"}
DISTS = ("django-celery-beat", "Django", "sqlalchemy-celery-beat")
NOTE = (
    "django-celery-beat and sqlalchemy-celery-beat: their `DatabaseScheduler` on PostgreSQL (a database of"
    " their own), N entries every hour, the due ones last run 2 h before the reset; one tick = `tick()` until"
    " it returns a wait (one due entry sent per call; each call checks the database for schedule changes and"
    " compares the whole schedule, O(N)), then `sync()` (one SELECT + UPDATE per sent entry: the write-back"
    " the real beat does every 3 minutes, the same work per fire). Django: persistent connections"
    " (`CONN_MAX_AGE=None`); sqlalchemy-celery-beat: its own `NullPool` (a connection per session)."
    ' A tick still running after 5 minutes is stopped ("did not finish in 5 min"); after the first'
    " repetition, another runs only while the system's repetitions so far took under the repetition budget"
    " (5 min; `--quick`: 15 s), so a cell may show fewer reps (bench/compare_incumbents.py)."
)
