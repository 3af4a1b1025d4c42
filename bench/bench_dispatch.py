"""Bench: dispatching claimed fires through Celery on the real Redis, and a big tick end to end.

Part 1, dispatch (events on: ``task_send_sent_event``; the same process, the same Redis db, in
turn): fires dispatched per second for 1,000 and 10,000 claimed fires by

* ``loop``: a plain ``run.apply_async(args, expires=...)`` per fire (the baseline);
* ``single``: ``CeleryDispatcher.send_runs`` with ``run_batch_size=1`` (one producer, one
  connection for the batch, one message per fire);
* ``packed``: ``CeleryDispatcher.send_runs`` with the default ``run_batch_size`` (20 fires per
  ``alma_schedule.run_many`` message; each fire still started on its own by the worker).

Part 2, end to end on PostgreSQL: 100,000 routines (COPY into a scratch database), 10,000 of them
due at the tick; one tick worker and 2 run worker processes (``celery -A alma_schedule.celery
worker``, prefork -c 1 each) with a trivial runner kind (one Redis HINCRBY per execution, loaded
through the ``alma_schedule.runners`` entry points); one tick sent by ``send_tick``. Reported:
seconds from sending the tick to the tick's end and to the last ``running``, and duplicates
(executions beyond one per fire, counted by the runner's side effect): must be 0.

    .venv/bin/python bench/bench_dispatch.py                 # both parts (~3-4 minutes)
    .venv/bin/python bench/bench_dispatch.py --part dispatch --sizes 1000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import redis

from alma_schedule.celery import create_app
from alma_schedule.clock import send_tick
from alma_schedule.model import RUN_TASK, RunRecord
from alma_schedule.settings import Settings
from alma_schedule.tasks import CeleryDispatcher

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import spawn as _spawn
from procs import stop as _stop
from store_load import ROUTINE_COLS, copy, routine_rows, scratch_database

REDIS_BASE = os.environ.get("ALMA_BENCH_REDIS", "redis://127.0.0.1:6379")
CELERY = str(Path(sys.executable).parent / "celery")

RUNNER_MODULE = """
from __future__ import annotations
import redis
from alma_schedule.model import RunResult

class Trivial:
    def __init__(self, url):
        self.r = redis.Redis.from_url(url)
    def validate(self, routine):
        return None
    def run(self, routine, handle):
        self.r.hincrby("bench:effects", str(handle.key), 1)
        return RunResult.completed()

def factory(settings):
    return Trivial(settings.broker_url)
"""


@contextlib.contextmanager
def redis_db() -> Any:
    """A Redis db number nobody else holds (the tests' lock keys), flushed before and after."""
    lock = redis.Redis.from_url(f"{REDIS_BASE}/0")
    db = next((d for d in range(15, 0, -1) if lock.set(f"alma-test-db-lock:{d}", os.getpid(), nx=True, ex=3600)), None)
    if db is None:
        raise SystemExit("no free Redis db")
    url = f"{REDIS_BASE}/{db}"
    r = redis.Redis.from_url(url)
    r.flushdb()
    try:
        yield url, r
    finally:
        r.flushdb()
        r.close()
        lock.delete(f"alma-test-db-lock:{db}")
        lock.close()


def records(n: int) -> list[RunRecord]:
    now = datetime.now(UTC).replace(microsecond=0)
    return [
        RunRecord(
            org=f"org-{i % 100}",
            uid="user-1",
            routine_id=f"routine-{i:07d}",
            run_id="2026-01-01T00:00:00Z",
            state="claimed",
            origin="schedule",
            config_revision="rev-1",
            fire_at=now,
            claimed_at=now,
            state_at=now,
            expires_at=now + timedelta(seconds=300 + i % 60),
        )
        for i in range(n)
    ]


def part_dispatch(sizes: list[int], reps: int) -> None:
    print("== dispatch: fires/s (median of reps), events on, Redis")
    with redis_db() as (url, r):
        single = Settings(broker_url=url, task_events=True, run_batch_size=1)
        packed = Settings(broker_url=url, task_events=True)
        app_loop = create_app(single)
        run_task = app_loop.tasks[RUN_TASK]

        def loop(fires: list[RunRecord]) -> None:
            for f in fires:
                run_task.apply_async(args=f.key.args(), expires=f.expires_at)

        variants = {
            "loop": loop,
            "single": CeleryDispatcher(create_app(single), single).send_runs,
            "packed": CeleryDispatcher(create_app(packed), packed).send_runs,
        }
        for fn in variants.values():  # warm up connections and pools
            fn(records(20))
        for n in sizes:
            fires = records(n)
            rates: dict[str, list[float]] = {k: [] for k in variants}
            for _ in range(reps if n <= 1000 else max(1, reps // 2)):
                for name, fn in variants.items():
                    r.flushdb()
                    t0 = time.perf_counter()
                    fn(fires)
                    rates[name].append(n / (time.perf_counter() - t0))
            med = {k: statistics.median(v) for k, v in rates.items()}
            print(
                f"  {n:>6} fires: loop {med['loop']:8.0f}/s | single {med['single']:8.0f}/s "
                f"({med['single'] / med['loop']:.2f}x) | packed x{packed.run_batch_size} {med['packed']:8.0f}/s "
                f"({med['packed'] / med['loop']:.2f}x)   [runs: {', '.join(f'{k}={len(v)}' for k, v in rates.items())}]"
            )


def part_end_to_end(routines: int, due: int, batch_size: int, tmp: Path) -> None:
    with redis_db() as (url, r), scratch_database() as (db_url, conninfo):
        now = datetime.now(UTC)
        # hourly routines registered a day ago: the due ones fire exactly at ``now`` and their run
        # messages expire an hour later (nothing expires while the backlog drains)
        hourly = json.dumps({"every": 3600})
        rows = ((*row[:3], "trivial", hourly, *row[5:]) for row in routine_rows(routines, due, now))
        t0 = time.perf_counter()
        copy(conninfo, "routines", ROUTINE_COLS, rows)
        print(f"  loaded {routines} routines in {time.perf_counter() - t0:.1f}s ({due} due)")

        eps = tmp / "eps" / "alma_bench_runner-0.dist-info"
        eps.mkdir(parents=True, exist_ok=True)
        (eps / "METADATA").write_text("Metadata-Version: 2.1\nName: alma-bench-runner\nVersion: 0\n")
        (eps / "entry_points.txt").write_text("[alma_schedule.runners]\ntrivial = alma_bench_runner:factory\n")
        (tmp / "eps" / "alma_bench_runner.py").write_text(RUNNER_MODULE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
        env.update(
            ALMA_DATABASE_URL=db_url, ALMA_BROKER_URL=url, ALMA_RESULT_BACKEND=url,
            ALMA_RUN_BATCH_SIZE=str(batch_size), PYTHONPATH=str(tmp / "eps"), ALMA_LOG_LEVEL="WARNING",
        )  # fmt: skip
        base = [CELERY, "-A", "alma_schedule.celery", "worker", "--without-mingle", "--without-gossip", "-l", "WARNING"]
        procs = [
            _spawn([*base, "-Q", "alma.tick", "-c", "1", "-n", "tick@%h"], env, tmp / "tick.log"),
            _spawn([*base, "-Q", "alma.run", "-c", "1", "-n", "w1@%h"], env, tmp / "w1.log"),
            _spawn([*base, "-Q", "alma.run", "-c", "1", "-n", "w2@%h"], env, tmp / "w2.log"),
        ]
        try:
            app = create_app(Settings(broker_url=url, result_backend=url))
            deadline = time.monotonic() + 120
            while len(app.control.ping(timeout=1.0) or []) < 3:  # every worker consuming
                if time.monotonic() > deadline:
                    raise SystemExit("workers did not start: see " + str(tmp))
            settings = Settings(broker_url=url)
            sent_at = datetime.now(UTC)
            t_send = time.perf_counter()
            task_id = send_tick(settings)
            report = app.AsyncResult(task_id).get(timeout=600)
            tick_done = time.perf_counter() - t_send
            with psycopg.connect(conninfo, autocommit=True) as conn:
                progress = (-1, time.perf_counter())
                while True:
                    started, last = conn.execute(
                        "SELECT count(*), max(started_at) FROM runs WHERE started_at IS NOT NULL"
                    ).fetchone()  # type: ignore[misc]
                    if started >= report["claimed"]:
                        break
                    if started != progress[0]:
                        progress = (started, time.perf_counter())
                    elif time.perf_counter() - progress[1] > 10 and r.llen("alma.run") == 0:
                        print("  (no progress for 10 s with an empty run queue: stopping)")
                        break
                    time.sleep(0.2)
                states = dict(conn.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall())
            effects = [int(v) for v in r.hvals("bench:effects")]
            duplicates = sum(v - 1 for v in effects if v > 1)
            to_last = (last - sent_at).total_seconds() if last else float("nan")
            print(
                f"  batch {batch_size:>2}: tick claimed {report['claimed']} (errors {report['errors']}), tick done "
                f"after {tick_done:.1f}s; last running after {to_last:.1f}s; started {started}; "
                f"executions {sum(effects)}; duplicates {duplicates}; states {states}"
            )
        finally:
            for proc in procs:
                _stop(proc)


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("all", "dispatch", "e2e"), default="all")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--routines", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=10_000)
    parser.add_argument("--batch-sizes", default="20,1", help="run_batch_size values for the end-to-end part")
    args = parser.parse_args()
    if args.part in ("all", "dispatch"):
        part_dispatch([int(s) for s in args.sizes.split(",")], args.reps)
    if args.part in ("all", "e2e"):
        print(f"== end to end: {args.routines} routines, {args.due} due, 1 tick worker + 2 run workers (-c 1)")
        for size in (int(s) for s in args.batch_sizes.split(",")):
            with tempfile.TemporaryDirectory(prefix="alma-bench-") as tmp:
                part_end_to_end(args.routines, args.due, size, Path(tmp))


if __name__ == "__main__":
    main()
