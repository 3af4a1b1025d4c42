"""Bench: ``Scheduler.tick()`` against the store's bare ``claim_due``, on PostgreSQL, in the same run.

For each size (routines in the table) and each due count, the script creates a fresh database,
migrates it, bulk-loads the routines with COPY into the store's own ``routines`` table, then
alternates two measurements, resetting the due rows (and deleting the run rows) before each:

* ``claim_due``: the store's bare ``claim_due(now, claim_limit, decide, timers)`` with a decide that
  returns precomputed fires (the store's cost alone);
* ``tick``: ``Scheduler.tick(now)`` with a counting dispatcher (claim batches with the real decide
  over the scheduling core, re-sends, polls, maintenance, heartbeat, blocked).

Target: ``tick <= 1.3 * claim_due + 50 us * due``, flat in the number of routines. The idle tick
(nothing due: re-sends, polls, maintenance, heartbeat, blocked) is reported as the fixed cost. The
due routines are spread over the key space and mix schedule kinds (UTC cron, zoned cron, every,
daily cron).

    .venv/bin/python bench/bench_tick.py --sizes 10000,100000 --due 100,1000 --reps 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from alma_schedule.engine import create_scheduler
from alma_schedule.model import Fire, Routine, RunRecord
from alma_schedule.settings import Settings, Timers
from alma_schedule.stores import open_store

PG_ADMIN = os.environ.get("ALMA_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
T = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # every due routine fires at T
NOW = T + timedelta(seconds=30)
PREV = T - timedelta(hours=1)
DUE_SCHEDULES = [
    {"cron": "0 * * * *"},
    {"cron": "0 * * * *", "tz": "America/New_York"},
    {"every": "1h"},
    {"cron": "0 12 * * *"},
]
COLUMNS = (
    "org, uid, routine_id, kind, schedule, definition, registered_at, config_revision, enabled, "
    "consecutive_failures, last_fire, next_due_at, error_count, created_at, updated_at"
)


class CountingDispatcher:
    def __init__(self) -> None:
        self.runs = 0
        self.collects = 0

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        self.runs += len(runs)

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        self.collects += len(runs)

    def run_queue_depth(self) -> int | None:
        return 0


class NullRunner:
    def validate(self, routine: Routine) -> None:
        return None

    def run(self, routine: Routine, handle: Any) -> Any:  # never called: the dispatcher only counts
        raise AssertionError("not in this bench")


def admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def exists(name: str) -> bool:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def create_db() -> tuple[str, str, str]:
    name = f"alma_bench_{uuid.uuid4().hex[:10]}"
    admin(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0]
    return name, f"{base}/{name}", f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"


def load(dsn: str, size: int, due: int) -> None:
    """COPY ``size`` routines; ``due`` of them (spread over the key space) due at T (``due`` may be 0)."""
    step = max(1, size // max(1, due))
    sql = f"COPY routines ({COLUMNS}) FROM STDIN"
    with psycopg.connect(dsn) as conn, conn.cursor() as cur, cur.copy(sql) as copy:  # type: ignore[arg-type]
        for i in range(size):
            is_due = i % step == 0 and i // step < due
            if is_due:
                schedule = DUE_SCHEDULES[(i // step) % len(DUE_SCHEDULES)]
                kind, last, nxt, reg = "bench-due", PREV, T, T - timedelta(hours=10)
            else:
                schedule = {"cron": f"{i % 60} {i % 24} * * *"}
                kind, last, nxt, reg = (
                    "bench",
                    None,
                    T + timedelta(minutes=1 + i % 1440),
                    T - timedelta(days=1),
                )
            copy.write_row(
                (
                    f"org{i % 97}",
                    f"u{i % 1009}",
                    f"r{i:08d}",
                    kind,
                    json.dumps(schedule),
                    "{}",
                    reg,
                    "rev",
                    True,
                    0,
                    last,
                    nxt,
                    0,
                    reg,
                    reg,
                )
            )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE routines")


def record_zone_data(dsn: str) -> None:
    """A long-lived fleet: the store records this process's zone data, so no zone data walk is left
    to do. (A COPY-loaded table has no ``tzdata_version``: without this row the first ticks would
    walk it, one ``claim_limit`` page per tick, rewriting every row once: a one-time cost whose dead
    tuples autovacuum then clears while the timed ticks run.)"""
    from alma_schedule.core.zones import zone_data

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO zone_state (id, zone_data) VALUES (1, %s) ON CONFLICT (id) DO UPDATE"
            " SET zone_data = excluded.zone_data, cursor_org = NULL, cursor_uid = NULL,"
            " cursor_routine_id = NULL",
            (zone_data(),),
        )


def reset(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM runs")
        conn.execute(
            "UPDATE routines SET last_fire = %s, next_due_at = %s WHERE kind = 'bench-due'",
            (PREV, T),  # type: ignore[arg-type]
        )
        conn.execute("VACUUM runs")


def fixed_decide(routine: Routine) -> Fire:
    return Fire(
        run_id="2026-06-01T12:00:00Z",
        fire_at=T,
        expires_at=T + timedelta(hours=1),
        next_due_at=T + timedelta(hours=1),
    )


def measure(size: int, due: int, reps: int) -> dict[str, Any]:
    from alma_schedule.stores.sql import migrate_store  # here: a worker importing this module never loads Alembic

    name, dsn, url = create_db()
    dsn = f"{dsn}?options=-csearch_path%3Dalma"  # the store's namespace: its tables live in schema alma
    try:
        migrate_store(url)
        t0 = time.perf_counter()
        load(dsn, size, due)
        record_zone_data(dsn)
        loaded = time.perf_counter() - t0
        store = open_store(url)
        settings = Settings(clock=lambda: NOW)
        timers = Timers.from_settings(settings)
        disp = CountingDispatcher()
        sched = create_scheduler(store=store, runner=NullRunner(), dispatcher=disp, settings=settings)
        bare: list[float] = []
        ticks: list[float] = []
        idle: list[float] = []
        for rep in range(reps + 1):  # the first round warms caches and is dropped
            reset(dsn)
            t0 = time.perf_counter()
            batch = store.claim_due(NOW, settings.claim_limit, fixed_decide, timers)
            b = time.perf_counter() - t0
            assert len(batch.claimed) == due, (len(batch.claimed), due)
            reset(dsn)
            before = disp.runs
            t0 = time.perf_counter()
            report = sched.tick(now=NOW)
            k = time.perf_counter() - t0
            assert len(report.claimed) == due and disp.runs - before == due and not report.errors
            t0 = time.perf_counter()
            assert sched.tick(now=NOW).claimed == ()  # nothing due: the tick's fixed cost
            i = time.perf_counter() - t0
            if rep:
                bare.append(b)
                ticks.append(k)
                idle.append(i)
        store.close()
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    b_med, k_med = statistics.median(bare), statistics.median(ticks)
    budget = 1.3 * b_med + 50e-6 * due
    return {
        "routines": size,
        "due": due,
        "load_s": round(loaded, 1),
        "claim_due_ms": round(b_med * 1e3, 2),
        "tick_ms": round(k_med * 1e3, 2),
        "idle_tick_ms": round(statistics.median(idle) * 1e3, 2),
        "ratio": round(k_med / b_med, 2),
        "budget_ms": round(budget * 1e3, 2),
        "us_per_fire_over_claim": round((k_med - b_med) / due * 1e6, 1),
        "ok": k_med <= budget,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000", help="routines in the table (comma list)")
    p.add_argument("--due", default="100,1000", help="due routines per tick (comma list)")
    p.add_argument("--reps", type=int, default=7, help="measured rounds per cell (median reported)")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    dues = [int(x) for x in args.due.split(",")]
    header = f"{'routines':>9} {'due':>5} {'claim_due ms':>12} {'tick ms':>8} {'ratio':>6} {'budget ms':>9} "
    print(header + f"{'us/fire':>8} {'ok':>3} {'idle tick ms':>12}  (load s)")
    results = []
    for size in sizes:
        for due in dues:
            r = measure(size, due, args.reps)
            results.append(r)
            print(
                f"{r['routines']:>9} {r['due']:>5} {r['claim_due_ms']:>12} {r['tick_ms']:>8} {r['ratio']:>6} "
                f"{r['budget_ms']:>9} {r['us_per_fire_over_claim']:>8} {'yes' if r['ok'] else 'NO':>3} "
                f"{r['idle_tick_ms']:>12}"
                f"  ({r['load_s']})",
                flush=True,
            )
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
