"""Round trips of an idle tick, counted in-process on our own connections.

The tick task is called directly (``app.tasks[TICK_TASK]()``, as the benchmark does) over a
PostgreSQL store of ``--routines`` routines, none due, with a real Celery app on Redis. After
``--warm`` ticks (zone data check, prepared statements) ``--ticks`` ticks are counted. The default
12 warm ticks are the steady state of a long-lived worker: psycopg prepares a statement at its
5th execution on a connection (one more round trip, once per statement and connection) and the
pool hands its two connections out in turn, so with fewer warm ticks those one-time preparations
fall into the count (3 warm, 5 counted: 3.6 round trips per tick where the steady state is 3.0).

* PostgreSQL round trips: libpq's own protocol trace (``PQtrace``) of every connection the store
  checks out; each frontend ``Query`` (simple protocol) or ``Sync`` (extended protocol) is one
  round trip. New connections are counted by the engine's ``connect`` event. ``pg_transactions``
  counts the ``BEGIN`` statements (an idle tick runs none: its three statements are autocommit).
* Redis round trips: every ``send_packed_command`` of redis-py (a pipeline is one), and new Redis
  connections (``Connection.connect``).

    .venv/bin/python bench/round_trips.py --routines 1000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from typing import Any

import redis
import redis.connection
import sqlalchemy as sa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from store_load import ROUTINE_COLS, copy, routine_rows, scratch_database

from alma_schedule.celery import create_app
from alma_schedule.model import TICK_TASK
from alma_schedule.settings import Settings
from alma_schedule.tasks import composition_of

REDIS_BASE = os.environ.get("ALMA_BENCH_REDIS", "redis://127.0.0.1:6379")
WARM, TICKS = 12, 20


class RedisCounter:
    """Counts redis-py round trips and new connections while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.round_trips = 0
        self.connects = 0
        base = redis.connection.AbstractConnection
        send, connect = base.send_packed_command, base.connect
        counter = self

        def counted_send(conn: Any, command: Any, check_health: bool = True) -> None:
            if counter.on:
                counter.round_trips += 1
            send(conn, command, check_health)

        def counted_connect(conn: Any) -> None:
            if counter.on and conn._sock is None:
                counter.connects += 1
            connect(conn)

        redis.connection.AbstractConnection.send_packed_command = counted_send  # type: ignore[method-assign]
        redis.connection.AbstractConnection.connect = counted_connect  # type: ignore[method-assign]


class PgCounter:
    """Traces every connection the store checks out while ``on`` (libpq's PQtrace)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.on = False
        self.connects = 0
        self.trace = tempfile.TemporaryFile(mode="w+")

        @sa.event.listens_for(engine, "connect")
        def _connect(_dbapi: Any, _record: Any) -> None:
            if self.on:
                self.connects += 1

        @sa.event.listens_for(engine, "checkout")
        def _checkout(dbapi: Any, _record: Any, _proxy: Any) -> None:
            if self.on:
                dbapi.pgconn.trace(self.trace.fileno())
                dbapi.pgconn.set_trace_flags(1)  # PQTRACE_SUPPRESS_TIMESTAMPS

        @sa.event.listens_for(engine, "checkin")
        def _checkin(dbapi: Any, _record: Any) -> None:
            if dbapi is not None and not dbapi.closed:
                dbapi.pgconn.untrace()

    def round_trips(self) -> dict[str, int]:
        self.trace.flush()
        self.trace.seek(0)
        counts = {"Query": 0, "Sync": 0, "BEGIN": 0}
        for line in self.trace:
            parts = line.rstrip("\n").split("\t")
            if len(parts) > 2 and parts[0] == "F" and parts[2] in counts:
                counts[parts[2]] += 1
                if len(parts) > 3 and parts[3].strip(' "').startswith("BEGIN"):
                    counts["BEGIN"] += 1
        return counts


def redis_url() -> tuple[str, redis.Redis]:
    lock = redis.Redis.from_url(f"{REDIS_BASE}/0")
    db = next((d for d in range(15, 0, -1) if lock.set(f"alma-test-db-lock:{d}", os.getpid(), nx=True, ex=3600)), None)
    if db is None:
        raise SystemExit("no free Redis db")
    return f"{REDIS_BASE}/{db}", lock


def count(routines: int, warm: int, ticks: int) -> dict[str, Any]:
    rc = RedisCounter()
    url_redis, lock = redis_url()
    try:
        with scratch_database() as (url, conninfo):
            copy(conninfo, "routines", ROUTINE_COLS, routine_rows(routines, 0, datetime.now(UTC)))
            settings = Settings(database_url=url, broker_url=url_redis, result_backend=url_redis)
            app = create_app(settings)
            comp = composition_of(app)
            assert comp is not None
            pg = PgCounter(comp.store().engine)  # type: ignore[attr-defined]
            tick = app.tasks[TICK_TASK]
            for _ in range(warm):
                tick()
            pg.on = rc.on = True
            for _ in range(ticks):
                report = tick()
                assert report["claimed"] == 0, report
            pg.on = rc.on = False
            trips = pg.round_trips()
            comp.close()
    finally:
        redis.Redis.from_url(url_redis).flushdb()
        lock.delete(f"alma-test-db-lock:{url_redis.rsplit('/', 1)[1]}")
    return {
        "routines": routines,
        "ticks": ticks,
        "pg_round_trips_per_tick": (trips["Query"] + trips["Sync"]) / ticks,
        "pg_simple_queries_per_tick": trips["Query"] / ticks,
        "pg_extended_syncs_per_tick": trips["Sync"] / ticks,
        "pg_transactions_per_tick": trips["BEGIN"] / ticks,
        "pg_new_connections": pg.connects,
        "redis_round_trips_per_tick": rc.round_trips / ticks,
        "redis_new_connections": rc.connects,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routines", type=int, default=1000)
    ap.add_argument("--warm", type=int, default=WARM)
    ap.add_argument("--ticks", type=int, default=TICKS)
    args = ap.parse_args(argv)
    print(json.dumps(count(args.routines, args.warm, args.ticks), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
