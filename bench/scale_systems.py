"""The database and the two contenders of ``bench/scale.py``: our tick and OUR floor, on one loaded store.

``Loaded`` is one migrated PostgreSQL database (our real schema) holding N routines (COPY) and one
FINISHED run per routine (COPY: the ledger), reused across repetitions; ``reset(due)`` (untimed)
makes the first ``due`` bench-due routines due at ``bt.T``, the others not, deletes the runs of
earlier repetitions and re-creates the workload that supersedes and overlaps: every tenth due
routine has a pending schedule ``claimed`` run, every tenth (offset one) a ``running`` one. 10 % of
all routines carry schedule policies (:mod:`workload`, as in the main table), applied once at load.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from typing import Any

import bench_tick as bt
import compare_systems as cs
import psycopg
import redis
import workload

HISTORY = bt.T - timedelta(hours=2)  # the ledger's finished fire of every routine
RUN_ID = "%Y-%m-%dT%H:%M:%SZ"
HISTORY_COLS = (
    "org, uid, routine_id, run_id, state, reason, origin, config_revision, fire_at, claimed_at, state_at, "
    "expires_at, finished_at, send_attempts, poll_attempts, reserved_micros, reserve_ceilings, cost_micros, "
    "caps_crossed"
)


def key(i: int) -> tuple[str, str, str]:
    """The routine key ``bench_tick.load`` gives row ``i``."""
    return f"org{i % 97}", f"u{i % 1009}", f"r{i:08d}"


class Loaded:
    """One migrated database with N routines (``due_max`` of them can be due) and N finished runs."""

    def __init__(self, n: int, due_max: int, pg_admin: str, name: str | None = None) -> None:
        self.n, self.due_max, self.pg_admin = n, due_max, pg_admin
        bt.PG_ADMIN = pg_admin
        base = pg_admin.rsplit("/", 1)[0]
        self.reused = name is not None
        if name is None:
            self.name, dsn, self.url = bt.create_db()
        else:
            self.name, dsn = name, f"{base}/{name}"
            self.url = f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
        self.dsn = f"{dsn}?options=-csearch_path%3Dalma"

    def load(self) -> None:
        from alma_schedule.stores.sql import migrate_store

        migrate_store(self.url)
        bt.load(self.dsn, self.n, self.due_max)  # COPY, then VACUUM ANALYZE routines
        self.policies = workload.apply_policies(self.dsn, bt.T)  # 10 % of the routines (bench/workload.py)
        fire, when = HISTORY.strftime(RUN_ID), HISTORY
        sql = f"COPY runs ({HISTORY_COLS}) FROM STDIN"
        with psycopg.connect(self.dsn) as conn, conn.cursor() as cur, cur.copy(sql) as out:  # type: ignore[arg-type]
            for i in range(self.n):
                out.write_row(
                    (*key(i), fire, "completed", "ok", "schedule", "rev", when, when, when,
                     when + timedelta(hours=1), when, 1, 0, 0, "[]", 0, "[]")
                )  # fmt: skip
        bt.record_zone_data(self.dsn)  # a long-lived fleet: no zone data walk left to do
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE runs")
        self.ids()

    def ids(self) -> None:
        with psycopg.connect(self.dsn) as conn:
            self.due_ids = [
                r[0] for r in conn.execute("SELECT routine_id FROM routines WHERE kind = 'bench-due' ORDER BY 1")
            ]

    def reset(self, due: int) -> None:
        """Untimed: ``due`` routines due at T (10 % with a pending claimed run, 10 % a running one)."""
        ids = self.due_ids[:due]
        pending, active = ids[0::10], ids[1::10]
        old = bt.PREV
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM runs WHERE fire_at >= %s", (old,))
            conn.execute(
                "UPDATE routines SET last_fire = %s, next_due_at = CASE WHEN routine_id = ANY(%s) THEN %s"
                " ELSE %s END, defer_until = NULL, last_error = NULL, error_count = 0, schedule_claims = 0"
                " WHERE kind = 'bench-due'",
                (old, ids, bt.T, bt.T + timedelta(hours=1)),
            )
            for state, chosen in (("claimed", pending), ("running", active)):
                conn.execute(
                    "INSERT INTO runs (org, uid, routine_id, run_id, state, origin, config_revision, fire_at,"
                    " claimed_at, state_at, expires_at, started_at, resend_at, send_attempts, poll_attempts,"
                    " reserved_micros, reserve_ceilings, cost_micros, caps_crossed)"
                    " SELECT org, uid, routine_id, %s, %s, 'schedule', 'rev', %s, %s, %s, %s, %s, %s,"
                    " 0, 0, 0, '[]', 0, '[]' FROM routines WHERE routine_id = ANY(%s)",
                    (
                        old.strftime(RUN_ID), state, old, old, old, bt.NOW + timedelta(hours=1),
                        old if state == "running" else None, bt.NOW + timedelta(hours=1), chosen,
                    ),
                )  # fmt: skip
            conn.execute("VACUUM runs")
            conn.execute("VACUUM routines")

    def ledger(self) -> dict[str, int]:
        """The fires at T: rows per state, and how many routines have more than one row at T."""
        with psycopg.connect(self.dsn) as conn:
            at_t = conn.execute("SELECT state, count(*) FROM runs WHERE fire_at = %s GROUP BY 1", (bt.T,))
            states = dict(at_t.fetchall())
            row = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM runs WHERE fire_at = %s GROUP BY org, uid, routine_id"
                " HAVING count(*) > 1) x",
                (bt.T,),
            ).fetchone()
            twice = row[0] if row else 0
        return {**{str(k): int(v) for k, v in states.items()}, "routines_twice": int(twice)}

    def drop(self) -> None:
        bt.admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def make_app(url: str, redis_url: str) -> Any:
    """Our Celery app over the store at ``url`` (a real worker imports it: ``bench/scale_app.py``)."""
    from alma_schedule.celery import create_app
    from alma_schedule.runners.registry import KindRegistry
    from alma_schedule.settings import Settings

    settings = Settings(clock=lambda: bt.NOW, database_url=url, broker_url=redis_url, result_backend=redis_url)
    registry = KindRegistry(
        settings, builtins=False, use_entry_points=False,
        factories={"bench": lambda s: cs._Noop(), "bench-due": lambda s: cs._Noop()},
    )  # fmt: skip
    app = create_app(settings, registry=registry)
    app.conf.alma_scale_batch = settings.run_batch_size
    return app


class Ours(cs.Alma):
    """The tick task called directly in this (long-lived) process, over the loaded store."""

    def __init__(self, db: Loaded, redis_url: str) -> None:
        super().__init__(db.n, db.due_max, redis_url, db.pg_admin)
        self.db = db
        self.batches: list[float] = []
        self.claims: list[int] = []

    def setup(self) -> None:
        from alma_schedule.model import TICK_TASK
        from alma_schedule.tasks import composition_of

        self.app = make_app(self.db.url, self.redis_url)
        self.batch_size = self.app.conf.get("alma_scale_batch", 20)
        self._tick = self.app.tasks[TICK_TASK]
        comp = composition_of(self.app)
        assert comp is not None
        self.store = comp.schedule().store
        claim = self.store.claim_due

        def timed(*a: Any, **kw: Any) -> Any:  # the claim batches, timed one by one
            t0 = time.perf_counter()
            batch = claim(*a, **kw)
            self.batches.append(time.perf_counter() - t0)
            self.claims.append(len(batch.claimed))
            return batch

        self.store.claim_due = timed

    def reset(self) -> None:
        self.db.reset(self.due)
        self.batches, self.claims = [], []

    def tick(self) -> int:
        """The messages it should have published: each batch's claims are one dispatch (packed
        ``run_batch_size`` to a message above that size)."""
        report = self._tick(now=bt.NOW.isoformat())
        if report["errors"]:
            raise SystemExit(f"alma tick errors: {report}")
        size = self.batch_size
        return sum(c if c <= size else -(-c // size) for c in self.claims)

    def warm(self) -> None:
        for _ in range(3):
            self.reset()
            self.tick()

    def teardown(self) -> None:
        from alma_schedule.tasks import composition_of

        comp = composition_of(self.app) if hasattr(self, "app") else None
        if comp is not None:
            comp.close()


class OurFloor(cs.System):
    """OUR floor: the minimal floor's three statements in one transaction, hand-written on our own
    tables and indexes (the same ledger), then one pipelined LPUSH of Celery-shaped messages packed
    ``pack`` fires to a message, as our dispatch packs them (fewer messages: a stricter floor). The
    cursor UPDATE reaches the rows the SELECT locked by their ``ctid`` (a TID scan), never by a
    plan the row estimates choose."""

    def __init__(self, db: Loaded, redis_url: str, pack: int) -> None:
        self.db, self.redis_url, self.pack, self.due = db, redis_url, pack, db.due_max

    def setup(self) -> None:
        from psycopg.types.array import ListBinaryDumper

        self.conn = psycopg.connect(self.db.dsn)
        self.conn.adapters.register_dumper(list, ListBinaryDumper)
        self.r = redis.Redis.from_url(self.redis_url)

    def reset(self) -> None:
        self.db.reset(self.due)

    def tick(self) -> int:
        now = bt.NOW
        with self.conn.transaction():
            rows = self.conn.execute(
                "SELECT org, uid, routine_id, next_due_at, config_revision, ctid FROM routines"
                " WHERE next_due_at <= %s ORDER BY next_due_at, org, uid, routine_id LIMIT %s FOR UPDATE SKIP LOCKED",
                (now, self.due),
            ).fetchall()
            cols = list(zip(*rows, strict=True)) if rows else [[], [], [], [], [], []]
            orgs, uids, rids, fires, revs, tids = (list(c) for c in cols)
            run_ids = [f.strftime(RUN_ID) for f in fires]
            taken = self.conn.execute(
                "INSERT INTO runs (org, uid, routine_id, run_id, state, origin, config_revision, fire_at,"
                " claimed_at, state_at, expires_at, resend_at, send_attempts, poll_attempts, reserved_micros,"
                " reserve_ceilings, cost_micros, caps_crossed)"
                " SELECT o, u, r, i, 'claimed', 'schedule', c, f, %s, %s, f + interval '1 hour', %s, 0, 0, 0,"
                " '[]', 0, '[]' FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[],"
                " %s::timestamptz[]) AS k(o, u, r, i, c, f)"
                " ON CONFLICT DO NOTHING RETURNING org, uid, routine_id, run_id",
                (now, now, now + timedelta(seconds=30), orgs, uids, rids, run_ids, revs, fires),
            ).fetchall()
            # The rows the SELECT locked, at their addresses (a TID scan): joined by key to the
            # unnest, PostgreSQL planned this UPDATE as a hash of a sequential scan of every routine
            # (40 of the floor's 65 ms at 100,000 routines, measured), no floor at all.
            self.conn.execute(
                "UPDATE routines SET last_fire = k.f, next_due_at = k.f + interval '1 hour', updated_at = %s"
                " FROM unnest(%s::text[]::tid[], %s::timestamptz[]) AS k(t, f)"
                " WHERE routines.ctid = ANY(%s::text[]::tid[]) AND routines.ctid = k.t",
                (now, tids, fires, tids),
            )
        messages = []
        for start in range(0, len(taken), self.pack):
            body = json.dumps([[list(t) for t in taken[start : start + self.pack]], {}, {"callbacks": None}])
            headers = {"task": "alma_schedule.run_many", "id": str(uuid.uuid4()), "expires": None}
            messages.append(json.dumps({"body": body, "headers": headers, "content-type": "application/json"}))
        if messages:
            self.r.lpush("our_floor", *messages)  # one round trip
        return len(messages)

    def teardown(self) -> None:
        if hasattr(self, "conn"):
            self.conn.close()
