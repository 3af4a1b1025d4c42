"""End to end: 10,000 fires due at once over 100,000 routines, against bare Celery on the same workers.

One tick worker and two run workers: real ``celery worker`` processes of our app (prefork, ``-c 1``
each, shipped defaults: ``run_batch_size`` and ``run_batch_budget`` are not set) on the given Redis,
over a PostgreSQL database of its own (routines loaded by COPY, :mod:`store_load`). The app module
the workers load is ``alma_schedule.celery``'s app plus one task ``bench.noop``; the routines'
kind ``trivial`` (an entry point) does what ``bench.noop`` does: one pipelined ``HINCRBY`` (the
duplicate check) and ``SET`` of the instant. Interleaved repetitions (A B C, A B C, ...):

* A ``ours``: from just before ``send_tick`` to the last run terminal in the store (``max(finished_at)``
  once every fire is terminal); the state is reset (untimed) before each repetition; each repetition
  also prints when the first and the last run started (seconds after the send: the tick's share);
* B ``bare``: the same two run workers consuming ``fires`` plain ``apply_async`` no-op tasks (on ``bench.bare``), from
  the first send to the last task's instant;
* C ``bare_msgs``: the same with as many messages as we published (the tick message plus the run
  messages the run workers consumed in the previous A, counted by ``inspect().stats()``: packing).

    .venv/bin/python bench/e2e.py [--quick] [--reps 3] [--redis redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import spawn as _spawn
from procs import stop as _stop
from store_load import ROUTINE_COLS, copy, rid, routine_rows, scratch_database

CELERY = str(Path(sys.executable).parent / "celery")
RUN_TASKS = ("alma_schedule.run", "alma_schedule.run_many")
#: The bare variants' queue: the same two run workers consume it beside ours (our queues run only our
#: tasks, so a plain no-op task sent to alma.run would be refused and dead-lettered).
BARE_QUEUE = "bench.bare"
RUN_QUEUES = f"alma.run,{BARE_QUEUE}"

APP_MODULE = """
import os, time
import redis
from alma_schedule.celery import app
from alma_schedule.model import RunResult

_r = redis.Redis.from_url(os.environ["ALMA_BROKER_URL"])

def effect(name):
    pipe = _r.pipeline(transaction=False)
    pipe.hincrby("bench:effects", name, 1)
    pipe.set("bench:last", repr(time.time()))
    pipe.execute()

@app.task(name="bench.noop", ignore_result=True)
def noop(i):
    effect(str(i))

class Trivial:
    def validate(self, routine):
        return None
    def run(self, routine, handle):
        effect(str(handle.key))
        return RunResult.completed()

def factory(settings):
    return Trivial()
"""


class Bench:
    def __init__(self, routines: int, fires: int, redis_url: str, tmp: Path, db_url: str, conninfo: str) -> None:
        self.routines, self.fires, self.tmp, self.conninfo = routines, fires, tmp, conninfo
        self.r = redis.Redis.from_url(redis_url)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
        self.env.update(
            ALMA_DATABASE_URL=db_url, ALMA_BROKER_URL=redis_url, ALMA_RESULT_BACKEND=redis_url,
            PYTHONPATH=os.pathsep.join(p for p in (str(tmp / "eps"), os.environ.get("PYTHONPATH")) if p),
            ALMA_LOG_LEVEL="WARNING",
        )  # fmt: skip
        self.procs: list[subprocess.Popen[bytes]] = []
        self.app: Any = None

    def setup(self) -> None:
        now = datetime.now(UTC)
        # the due ones hourly (their run messages expire an hour later), the others yearly, on
        # their schedule's own grid (the first tick's zone check re-derives every next_due_at)
        hourly, yearly = json.dumps({"every": 3600}), json.dumps({"cron": "0 0 1 1 *"})
        new_year = datetime(now.year + 1, 1, 1, tzinfo=UTC)
        rows = (
            (*row[:3], "trivial", hourly if i < self.fires else yearly, row[5], *row[6:12],
             row[12] if i < self.fires else new_year, *row[13:])
            for i, row in enumerate(routine_rows(self.routines, self.fires, now))
        )  # fmt: skip
        copy(self.conninfo, "routines", ROUTINE_COLS, rows)
        eps = self.tmp / "eps" / "alma_bench_e2e-0.dist-info"
        eps.mkdir(parents=True, exist_ok=True)
        (eps / "METADATA").write_text("Metadata-Version: 2.1\nName: alma-bench-e2e\nVersion: 0\n")
        (eps / "entry_points.txt").write_text("[alma_schedule.runners]\ntrivial = alma_bench_e2e:factory\n")
        (self.tmp / "eps" / "alma_bench_e2e.py").write_text(APP_MODULE)
        base = [CELERY, "-A", "alma_bench_e2e", "worker", "--without-mingle", "--without-gossip", "-l", "WARNING"]
        self.procs = [
            _spawn([*base, "-Q", "alma.tick", "-c", "1", "-n", "tick@%h"], self.env, self.tmp / "tick.log"),
            _spawn([*base, "-Q", RUN_QUEUES, "-c", "1", "-n", "w1@%h"], self.env, self.tmp / "w1.log"),
            _spawn([*base, "-Q", RUN_QUEUES, "-c", "1", "-n", "w2@%h"], self.env, self.tmp / "w2.log"),
        ]
        from alma_schedule.celery import create_app
        from alma_schedule.settings import Settings

        url = self.env["ALMA_BROKER_URL"]
        self.app = create_app(Settings(broker_url=url, result_backend=url))  # to send from here

        @self.app.task(name="bench.noop", ignore_result=True)  # the workers' own is in APP_MODULE
        def noop(i: int) -> None:
            return None

        self.noop = noop
        deadline = time.monotonic() + 120
        while len(self.app.control.ping(timeout=1.0) or []) < 3:
            if time.monotonic() > deadline:
                raise SystemExit(f"workers did not start: see {self.tmp}")

    def teardown(self) -> None:
        for proc in self.procs:
            _stop(proc)

    def consumed(self) -> int:
        """Run messages the run workers have consumed since they started."""
        stats = self.app.control.inspect(timeout=2.0).stats() or {}
        return sum(s.get("total", {}).get(t, 0) for name, s in stats.items() if not name.startswith("tick@")
                   for t in RUN_TASKS)  # fmt: skip

    def reset(self) -> None:
        self.r.delete("bench:effects", "bench:last")
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute("TRUNCATE runs")
            due_at = datetime.now(UTC) - timedelta(seconds=1)  # every due fire at one instant, on its grid
            conn.execute(
                "UPDATE routines SET next_due_at = %s, registered_at = %s, last_fire = NULL WHERE routine_id <= %s",
                (due_at, due_at - timedelta(days=1), rid(self.fires - 1)),
            )

    def warm(self) -> None:
        """One tick before the repetitions (untimed): the zone check, the workers' first runs."""
        self.reset()
        self.ours(check=False)

    def ours(self, *, check: bool = True) -> tuple[float, int, dict[str, Any]]:
        from alma_schedule.clock import send_tick
        from alma_schedule.settings import Settings

        before = self.consumed()
        t0 = time.time()
        task_id = send_tick(Settings(broker_url=self.env["ALMA_BROKER_URL"]))
        report = self.app.AsyncResult(task_id).get(timeout=600)
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            while True:
                done, last = conn.execute(
                    "SELECT count(*), max(finished_at) FROM runs WHERE finished_at IS NOT NULL"
                ).fetchone()  # type: ignore[misc]
                if done >= report["claimed"]:
                    break
                time.sleep(0.1)
            states = dict(conn.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall())
            first, last_start = conn.execute("SELECT min(started_at), max(started_at) FROM runs").fetchone()  # type: ignore[misc]
        if check:  # where the time went: the tick (to the first start), the runs (to the last terminal)
            print(json.dumps({"first_start": round(first.timestamp() - t0, 2),
                              "last_start": round(last_start.timestamp() - t0, 2)}), flush=True)  # fmt: skip
        effects = [int(v) for v in self.r.hvals("bench:effects")]
        dup = sum(v - 1 for v in effects if v > 1)
        if check and (report["claimed"] != self.fires or dup or states != {"completed": self.fires}):
            raise SystemExit(f"ours: claimed {report['claimed']}, states {states}, duplicates {dup}")
        time.sleep(1.0)  # the workers' stats settle
        messages = self.consumed() - before + 1  # + the tick message
        return last.timestamp() - t0, messages, states

    def bare(self, n: int) -> float:
        t0 = time.time()
        for i in range(n):
            self.noop.apply_async(args=[i], queue=BARE_QUEUE)
        deadline = time.monotonic() + 600
        while self.r.hlen("bench:effects") < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"bare: {self.r.hlen('bench:effects')} of {n} no-op tasks ran in 10 min")
            time.sleep(0.05)
        return float(self.r.get("bench:last") or "nan") - t0


def stats(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 2), "min": round(min(xs), 2), "max": round(max(xs), 2)}


def run(redis_url: str, *, routines: int, fires: int, reps: int) -> dict[str, Any]:
    """The section's dict: seconds per variant (median, min, max), ratios pair by pair, messages."""
    times: dict[str, list[float]] = {"ours": [], "bare": [], "bare_msgs": []}
    messages: list[int] = []
    with tempfile.TemporaryDirectory(prefix="alma-e2e-") as tmp, scratch_database() as (db_url, conninfo):
        bench = Bench(routines, fires, redis_url, Path(tmp), db_url, conninfo)
        try:
            bench.setup()
            bench.warm()
            for _ in range(reps):
                bench.reset()
                seconds, sent, _states = bench.ours()
                times["ours"].append(seconds)
                messages.append(sent)
                for name, n in (("bare", fires), ("bare_msgs", sent)):
                    bench.reset()
                    times[name].append(bench.bare(n))
                print(json.dumps({k: round(v[-1], 2) for k, v in times.items()} | {"messages": sent}), flush=True)
        finally:
            bench.teardown()
            bench.r.flushdb()

    def ratio(b: str) -> float:
        return round(statistics.median(o / x for o, x in zip(times["ours"], times[b], strict=True)), 2)

    return {
        "routines": routines, "fires": fires, "reps": reps, "workers": "1 tick + 2 run, prefork -c 1",
        "seconds": {k: stats(v) for k, v in times.items()}, "messages": messages,
        "ours_over_bare": ratio("bare"), "ours_over_bare_msgs": ratio("bare_msgs"),
    }  # fmt: skip


def section(redis_url: str, pg_admin: str, *, quick: bool) -> dict[str, Any]:
    """What bench/compare.py calls: the full size (3 repetitions) or ``--quick`` (10,000 / 1,000, 1)."""
    os.environ["ALMA_BENCH_PG_ADMIN"] = pg_admin
    from run_trips import count

    out = (
        run(redis_url, routines=10_000, fires=1_000, reps=1)
        if quick
        else run(redis_url, routines=100_000, fires=10_000, reps=3)
    )
    trips = count(20, 6)  # the run side's PostgreSQL round trips per fire, by kind (bench/run_trips.py)
    out["run_round_trips"] = {k: v["pg_round_trips_per_fire"] for k, v in trips.items() if isinstance(v, dict)}
    return out


def markdown(e2e: dict[str, Any]) -> list[str]:
    s = e2e["seconds"]

    def fmt(c: dict[str, float]) -> str:
        return f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})"

    return [
        "",
        f"End to end (bench/e2e.py): {e2e['fires']:,} fires due at once over {e2e['routines']:,} routines, "
        f"{e2e['workers']}, {e2e['reps']} interleaved repetitions, seconds to the last terminal run, "
        "median (min-max):",
        "",
        "| ours | bare Celery, one no-op per fire | bare Celery, our message count | messages | ours / bare "
        "| ours / bare (messages) |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {fmt(s['ours'])} | {fmt(s['bare'])} | {fmt(s['bare_msgs'])} | {e2e['messages']} | "
        f"{e2e['ours_over_bare']} | {e2e['ours_over_bare_msgs']} |",
    ] + (["", "Run side, PostgreSQL round trips per fire (bench/run_trips.py): " + json.dumps(e2e["run_round_trips"])]
         if "run_round_trips" in e2e else [])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10,000 routines, 1,000 fires, 1 repetition")
    ap.add_argument("--routines", type=int, default=0)
    ap.add_argument("--fires", type=int, default=0)
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--redis", default="", help="a Redis db of the bench's own (default: a free local db)")
    args = ap.parse_args(argv)
    lock = None
    url = args.redis
    if not url:
        from round_trips import redis_url

        url, lock = redis_url()
    try:
        routines = args.routines or (10_000 if args.quick else 100_000)
        fires = args.fires or (1_000 if args.quick else 10_000)
        out = run(url, routines=routines, fires=fires, reps=args.reps or (1 if args.quick else 3))
    finally:
        if lock is not None:
            lock.delete(f"alma-test-db-lock:{url.rsplit('/', 1)[1]}")
    print(json.dumps(out, indent=1))
    print("\n".join(markdown(out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
