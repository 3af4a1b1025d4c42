"""The systems ``bench/compare.py`` measures: each sets up, resets (untimed) and ticks once."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import bench_tick as bt
import psycopg
import redis
import workload

NOW_WALL = datetime.now(UTC).replace(microsecond=0)

#: Whether every system's Celery app publishes a ``task-sent`` event with each task message (Flower
#: sees the sends): alma-schedule's default (the ``task_events`` setting) and the same Celery setting,
#: ``task_send_sent_event``, on every incumbent's app, so that each system does the same broker work.
#: ``scripts/bench --task-events off`` turns it off on every side (set by ``compare.py``).
TASK_EVENTS = True


def published(r: redis.Redis) -> int:
    """Messages waiting in the bench Redis's Celery queues (each list that is not a kombu binding)."""
    total = 0
    for key in r.scan_iter(count=1000):
        if r.type(key) == b"list":
            total += int(r.llen(key))
    return total


class System:
    """``tick()`` returns how many messages it should have published (checked against Redis)."""

    def setup(self) -> None: ...
    def warm(self) -> None:
        self.reset()
        self.tick()

    def reset(self) -> None: ...
    def tick(self) -> int:
        raise NotImplementedError

    def teardown(self) -> None: ...


class _Noop:
    def validate(self, routine: Any) -> None:
        return None

    def run(self, routine: Any, handle: Any) -> Any:
        raise AssertionError("the bench never runs a fire")


class Alma(System):
    """The tick task, called directly, over a store with 10 % superseding and 10 % overlapping fires."""

    def __init__(self, n: int, due: int, redis_url: str, pg_admin: str) -> None:
        self.n, self.due, self.redis_url, self.pg_admin = n, due, redis_url, pg_admin

    def setup(self) -> None:
        from alma_schedule.celery import create_app
        from alma_schedule.model import TICK_TASK
        from alma_schedule.runners.registry import KindRegistry
        from alma_schedule.settings import Settings
        from alma_schedule.stores.sql import migrate_store

        bt.PG_ADMIN = self.pg_admin
        self.name, dsn, url = bt.create_db()
        self.dsn = f"{dsn}?options=-csearch_path%3Dalma"
        migrate_store(url)
        bt.load(self.dsn, self.n, self.due)
        self.policies = workload.apply_policies(self.dsn, bt.T)  # 10 % of the routines
        bt.record_zone_data(self.dsn)  # a long-lived fleet, as bench/scale.py's
        settings = Settings(
            clock=lambda: bt.NOW,
            database_url=url,
            broker_url=self.redis_url,
            result_backend=self.redis_url,
            task_events=TASK_EVENTS,
        )
        registry = KindRegistry(
            settings, builtins=False, use_entry_points=False,
            factories={"bench": lambda s: _Noop(), "bench-due": lambda s: _Noop()},
        )  # fmt: skip
        self.app = create_app(settings, registry=registry)
        self.batch_size = settings.run_batch_size
        self._tick = self.app.tasks[TICK_TASK]
        with psycopg.connect(self.dsn) as conn:
            due_ids = "SELECT routine_id FROM routines WHERE kind = 'bench-due' ORDER BY routine_id"
            ids = [r[0] for r in conn.execute(due_ids)]
        tenth = max(1, len(ids) // 10)
        self.pending, self.active = ids[:tenth], ids[tenth : 2 * tenth]

    def reset(self) -> None:
        bt.reset(self.dsn)
        old = bt.PREV
        with psycopg.connect(self.dsn) as conn:
            for state, ids in (("claimed", self.pending), ("running", self.active)):
                conn.execute(
                    "INSERT INTO runs (org, uid, routine_id, run_id, state, origin, config_revision, fire_at,"
                    " claimed_at, state_at, expires_at, started_at, resend_at, send_attempts, poll_attempts,"
                    " reserved_micros, reserve_ceilings, cost_micros, caps_crossed)"
                    " SELECT org, uid, routine_id, %s, %s, 'schedule', 'rev', %s, %s, %s, %s, %s, %s,"
                    " 0, 0, 0, '[]', 0, '[]'"
                    " FROM routines WHERE routine_id = ANY(%s)",
                    (
                        old.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        state,
                        old,
                        old,
                        old,
                        bt.NOW + timedelta(hours=1),
                        old if state == "running" else None,
                        bt.NOW + timedelta(hours=1),
                        ids,
                    ),
                )

    def tick(self) -> int:
        report = self._tick(now=bt.NOW.isoformat())
        if report["errors"]:
            raise SystemExit(f"alma tick errors: {report}")
        # a routine with a running run is decided skipped(overlap): not claimed, never sent; more
        # fires than run_batch_size leave packed, run_batch_size to an alma_schedule.run_many message
        claimed, size = int(report["claimed"]), self.batch_size
        return claimed if claimed <= size else -(-claimed // size)

    def warm(self) -> None:
        """A long-lived worker that has ticked before (its prepared statements warm)."""
        for _ in range(3):
            self.reset()
            self._tick(now=bt.NOW.isoformat())

    def teardown(self) -> None:
        from alma_schedule.tasks import composition_of

        comp = composition_of(self.app) if hasattr(self, "app") else None
        if comp is not None:
            comp.close()
        if hasattr(self, "name"):
            bt.admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class Floor(System):
    """The physical floor: 3 statements in one transaction + one pipelined LPUSH."""

    def __init__(self, n: int, due: int, redis_url: str, pg_admin: str) -> None:
        self.n, self.due, self.redis_url, self.pg_admin = n, due, redis_url, pg_admin

    def setup(self) -> None:
        self.name = f"alma_floor_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.pg_admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')  # type: ignore[arg-type]
        self.dsn = f"{self.pg_admin.rsplit('/', 1)[0]}/{self.name}"
        self.conn = psycopg.connect(self.dsn)
        with self.conn.transaction():
            self.conn.execute(
                "CREATE TABLE routines (id bigint PRIMARY KEY, next_due_at timestamptz NOT NULL);"
                "CREATE INDEX ix_due ON routines (next_due_at);"
                "CREATE TABLE runs (routine_id bigint NOT NULL, fire_at timestamptz NOT NULL,"
                " PRIMARY KEY (routine_id, fire_at))"
            )
            step = max(1, self.n // max(1, self.due))  # due may be 0 (the growth table)
            self.conn.execute(
                "INSERT INTO routines SELECT i, CASE WHEN i %% %s = 0 AND i / %s < %s THEN %s"
                " ELSE %s + (1 + i %% 1440) * interval '1 minute' END FROM generate_series(0, %s - 1) i",
                (step, step, self.due, bt.T, bt.T, self.n),
            )
        self.r = redis.Redis.from_url(self.redis_url)

    def reset(self) -> None:
        with self.conn.transaction():
            self.conn.execute("DELETE FROM runs")
            moved = bt.T + timedelta(hours=1)
            self.conn.execute("UPDATE routines SET next_due_at = %s WHERE next_due_at = %s", (bt.T, moved))

    def tick(self) -> int:
        with self.conn.transaction():
            rows = self.conn.execute(
                "SELECT id, next_due_at FROM routines WHERE next_due_at <= %s ORDER BY next_due_at"
                " LIMIT %s FOR UPDATE SKIP LOCKED",
                (bt.NOW, self.due),
            ).fetchall()
            ids = [r[0] for r in rows]
            fires = [r[1] for r in rows]
            self.conn.execute("INSERT INTO runs SELECT * FROM unnest(%s::bigint[], %s::timestamptz[])", (ids, fires))
            self.conn.execute(
                "UPDATE routines SET next_due_at = next_due_at + interval '1 hour' WHERE id = ANY(%s)", (ids,)
            )
        messages = []
        for i, fire in zip(ids, fires, strict=True):
            body = json.dumps([[str(i), fire.isoformat()], {}, {"callbacks": None, "errbacks": None}])
            headers = {"task": "alma_schedule.run", "id": str(uuid.uuid4()), "expires": None}
            messages.append(json.dumps({"body": body, "headers": headers, "content-type": "application/json"}))
        if messages:
            self.r.lpush("floor", *messages)  # one round trip
        return len(ids)

    def teardown(self) -> None:
        if not hasattr(self, "conn"):
            return
        self.conn.close()
        with psycopg.connect(self.pg_admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')  # type: ignore[arg-type]


def _incumbent_app(redis_url: str) -> Any:
    from celery import Celery

    app = Celery("bench", broker=redis_url)
    app.conf.broker_connection_retry_on_startup = True
    app.conf.task_send_sent_event = TASK_EVENTS  # as ours (see TASK_EVENTS)
    return app


class CeleryBeat(System):
    """celery beat's PersistentScheduler (shelve file), real wall clock, ``tick()`` until it waits."""

    def __init__(self, n: int, due: int, redis_url: str) -> None:
        self.n, self.due, self.redis_url = n, due, redis_url

    def setup(self) -> None:
        import tempfile

        from celery.beat import PersistentScheduler

        self.tmp = tempfile.TemporaryDirectory()
        self.app = _incumbent_app(self.redis_url)
        self.app.conf.beat_schedule = {
            f"e{i}": {"task": "bench.noop", "schedule": timedelta(hours=1)} for i in range(self.n)
        }
        self.sched = PersistentScheduler(self.app, schedule_filename=f"{self.tmp.name}/beat", lazy=False)
        step = max(1, self.n // max(1, self.due))  # due may be 0 (the growth table)
        self.due_names = [f"e{i}" for i in range(0, self.n, step)][: self.due]
        now = self.app.now()
        for entry in self.sched.schedule.values():
            entry.last_run_at = now

    def reset(self) -> None:
        import copy

        old = self.app.now() - timedelta(hours=2)
        for name in self.due_names:
            self.sched.schedule[name].last_run_at = old
        self.sched.populate_heap()
        self.sched.old_schedulers = copy.copy(self.sched.schedule)

    def tick(self) -> int:
        sent = 0
        while self.sched.tick() <= 0:  # 0: it applied one due entry; call again at once
            sent += 1
        return sent

    def teardown(self) -> None:
        self.sched.close()
        self.tmp.cleanup()


def drain(r: redis.Redis) -> None:
    """Delete the published messages (every list), keeping RedBeat's hashes and sorted set."""
    for key in list(r.scan_iter(count=1000)):
        if r.type(key) == b"list":
            r.delete(key)


class RedBeat(System):
    """``RedBeatScheduler.tick()`` over N entries in the bench Redis (its schedule and broker)."""

    def __init__(self, n: int, due: int, redis_url: str) -> None:
        self.n, self.due, self.redis_url = n, due, redis_url

    def setup(self) -> None:
        from celery.schedules import schedule
        from redbeat import RedBeatScheduler, RedBeatSchedulerEntry

        self.app = _incumbent_app(self.redis_url)
        self.app.conf.redbeat_redis_url = self.redis_url
        now = self.app.now()
        step = max(1, self.n // max(1, self.due))  # due may be 0 (the growth table)
        self.due_names = [f"e{i}" for i in range(0, self.n, step)][: self.due]
        every = schedule(timedelta(hours=1), app=self.app)
        self.entries = {}
        for i in range(self.n):
            entry = RedBeatSchedulerEntry(f"e{i}", "bench.noop", every, app=self.app, last_run_at=now)
            entry.save()
            self.entries[entry.name] = entry
        self.sched = RedBeatScheduler(self.app, lazy=True)
        self.sched.lock_key = None  # one scheduler: no distributed lock to extend

    def reset(self) -> None:
        old = self.app.now() - timedelta(hours=2)
        for name in self.due_names:
            self.entries[name].reschedule(last_run_at=old)

    def tick(self) -> int:
        self.sched.tick()
        return self.due  # checked against what reached Redis

    def teardown(self) -> None:
        r = redis.Redis.from_url(self.redis_url)
        r.flushdb()
