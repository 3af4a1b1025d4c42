"""The processes of one lag run (``bench/lag.py``): one system's fleet, workers and clock, for real.

A run is one system (``celery_beat``, ``redbeat``, ``alma_beat``, ``alma_clock``: see
``bench/lag_fleet.py``) over a set of routines, with the README's worker layout:

* celery beat and RedBeat: one prefork worker ``-c 2`` for the fleet task (queue ``celery``) and
  ``celery -A lag_fleet beat``;
* alma-schedule, layout ``dedicated`` (the README's step 5): ``worker -Q alma.tick -c 1`` and
  ``worker -Q alma.run,alma.collect,celery -c 2``; layout ``shared``: one
  ``worker -Q alma.tick,alma.run,alma.collect,celery -c 2``; layout ``runs``: the tick worker, our runs
  on a thread pool of their own (``worker -Q alma.run,alma.collect -P threads -c 8``) and the fleet's
  ``worker -Q celery -c 2`` running its tasks only (``runs-unpacked``: the same with
  ``ALMA_RUN_BATCH_SIZE=1``, one run message per fire); the clock ``celery -A lag_fleet beat``
  (``alma_beat``) or ``alma-schedule -A lag_fleet clock run`` (``alma_clock``), default settings
  (only the store's URL).

Every worker runs with ``-E`` (Flower's events), ``--without-mingle --without-gossip`` and ``-l
WARNING``. Routines are ``{name: (kind, period_s, phase)}``: ``cron`` (every minute), ``every``
(period seconds: alma-schedule's fires are anchored on the registration; celery beat and RedBeat
count the period from their previous send: no nominal instant),
``at`` (once at ``phase``: RedBeat an interval of ``period`` whose next instant is ``phase``),
``never`` (a yearly crontab outside the window).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from procs import spawn, stop  # noqa: E402

BIN = Path(sys.executable).parent
Spec = dict[str, tuple[str, float, float | None]]
WORKER = ["worker", "-E", "-l", "WARNING", "--without-mingle", "--without-gossip"]
ORG, UID = "bench", "lag"


def alma_schedule_json(kind: str, period: float, phase: float | None) -> dict[str, Any]:
    if kind == "cron":
        return {"cron": "* * * * *"}
    if kind == "never":
        return {"cron": "0 0 1 1 *"}
    if kind == "at":
        assert phase is not None
        return {"at": datetime.fromtimestamp(phase, UTC).isoformat()}
    return {"every": int(period)}


class Events:
    """Flower's view: every event the workers and senders publish, counted by type with its arrival."""

    def __init__(self, redis_url: str) -> None:
        from celery import Celery

        self.app = Celery("lag_events", broker=redis_url, set_as_current=False)
        self.seen: list[tuple[float, str]] = []
        self.recv: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.app.connection_for_read() as conn:
            self.recv = self.app.events.Receiver(conn, handlers={"*": self._on})
            self.recv.capture(limit=None, timeout=None, wakeup=False)

    def _on(self, event: dict[str, Any]) -> None:
        self.seen.append((time.time(), str(event.get("type"))))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        if self.recv is not None:
            self.recv.should_stop = True
        if self.thread.is_alive():
            self.thread.join(5)

    def count(self, t0: float, t1: float) -> dict[str, int]:
        return dict(Counter(kind for at, kind in list(self.seen) if t0 <= at < t1))


class Busy:
    """The busy fleet: one ``bench.busy`` (2 s) every 2 s on the ``celery`` queue, i.e. half of a
    ``-c 2`` pool, sent from this process until stopped."""

    def __init__(self, redis_url: str, every: float = 2.0) -> None:
        from celery import Celery

        self.app = Celery("lag_busy", broker=redis_url, set_as_current=False)
        self.every, self.sent = every, 0
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        at = time.time()
        while not self.halt.is_set():
            self.app.send_task("bench.busy", queue="celery", ignore_result=True)
            self.sent += 1
            at += self.every
            self.halt.wait(max(0.0, at - time.time()))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.halt.set()
        if self.thread.is_alive():
            self.thread.join(5)


class LagRun:
    """One system over ``routines``: ``start()`` loads and starts everything; ``stop()`` ends it."""

    def __init__(self, system: str, routines: Spec, redis_url: str, pg_admin: str, tmp: Path, *,
                 layout: str = "dedicated") -> None:  # fmt: skip
        self.system, self.routines, self.redis_url, self.pg_admin = system, routines, redis_url, pg_admin
        self.tmp, self.layout = tmp, layout
        self.r = redis.Redis.from_url(redis_url)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.clock: subprocess.Popen[bytes] | None = None
        self.db: Any = None
        self.conninfo = ""
        self.phases: dict[str, float] = {}  # RedBeat's ``at`` entries: the last_run_at loaded
        self.started: dict[str, float] = {}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("ALMA_", "LAG_", "CELERY"))}
        self.env.update(LAG_SYSTEM=system, LAG_REDIS=redis_url, PYTHONPATH=str(HERE), PYTHONUNBUFFERED="1")

    @property
    def alma(self) -> bool:
        return self.system.startswith("alma")

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        self.r.flushdb()
        t0 = time.time()
        if self.alma:
            self._alma_store()
        elif self.system == "redbeat":
            self._redbeat_entries()
        else:
            spec = self.tmp / "beat-spec.json"
            spec.write_text(json.dumps(self.routines))
            self.env["LAG_SPEC"] = str(spec)
        self.started["load_s"] = time.time() - t0
        celery = [str(BIN / "celery"), "-A", "lag_fleet"]
        if not self.alma:
            workers = [["-Q", "celery", "-c", "2", "-n", "fleet@%h"]]
        elif self.layout == "shared":
            workers = [["-Q", "alma.tick,alma.run,alma.collect,celery", "-c", "2", "-n", "fleet@%h"]]
        elif self.layout in ("runs", "runs-unpacked"):  # our runs on a thread pool of their own
            workers = [["-Q", "alma.tick", "-c", "1", "-n", "tick@%h"],
                       ["-Q", "alma.run,alma.collect", "-P", "threads", "-c", "8", "-n", "runs@%h"],
                       ["-Q", "celery", "-c", "2", "-n", "fleet@%h"]]  # fmt: skip
        else:
            workers = [["-Q", "alma.tick", "-c", "1", "-n", "tick@%h"],
                       ["-Q", "alma.run,alma.collect,celery", "-c", "2", "-n", "fleet@%h"]]  # fmt: skip
        if self.layout == "runs-unpacked":  # one run message per fire (no run_many packing)
            self.env["ALMA_RUN_BATCH_SIZE"] = "1"
        for i, args in enumerate(workers):
            self.procs.append(spawn([*celery, *WORKER, *args], self.env, self.tmp / f"worker{i}.log"))
        self._wait_workers(len(workers))
        self.started["workers_s"] = time.time() - t0
        if self.system == "alma_clock":
            argv = [str(BIN / "alma-schedule"), "-A", "lag_fleet", "clock", "run"]
        else:
            argv = [*celery, "beat", "-l", "WARNING", "-s", str(self.tmp / "beat-schedule")]
        self.started["clock_at"] = time.time()
        self.clock = spawn(argv, self.env, self.tmp / "clock.log")
        time.sleep(0.5)
        if self.clock.poll() is not None:
            raise SystemExit(f"{self.system}: the clock exited: {(self.tmp / 'clock.log').read_text()[-2000:]}")

    def _wait_workers(self, n: int) -> None:
        from celery import Celery

        app = Celery("lag_ping", broker=self.redis_url, set_as_current=False)
        deadline = time.monotonic() + 120
        while len(app.control.ping(timeout=0.5) or []) < n:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                logs = "".join(p.read_text()[-1500:] for p in self.tmp.glob("worker*.log"))
                raise SystemExit(f"{self.system}: workers did not start: {logs}")
        app.close()

    def _redbeat_entries(self) -> None:
        from celery.schedules import crontab, schedule
        from lag_fleet import NOOP, make_app
        from redbeat import RedBeatSchedulerEntry

        app = make_app("redbeat", self.redis_url)
        now = app.now()
        for name, (kind, period, phase) in self.routines.items():
            last = now
            if kind == "cron":
                sched: Any = crontab(app=app)
            elif kind == "never":
                sched = crontab(minute=0, hour=0, day_of_month=1, month_of_year=1, app=app)
            else:  # after a send RedBeat counts the period from that send: no fixed phase, but
                # an ``at`` fires once in the window, at the whole second its last_run_at names
                sched = schedule(timedelta(seconds=period), app=app)
                if kind == "at":
                    assert phase is not None
                    last = datetime.fromtimestamp(phase - period, UTC)
                    self.phases[name] = phase - period
            RedBeatSchedulerEntry(name, NOOP, sched, args=[name], app=app, last_run_at=last).save()
        app.close()

    def _alma_store(self) -> None:
        from lag_fleet import NOOP, make_app
        from store_load import scratch_database

        from alma_schedule.model import RoutineSpec

        self.db = scratch_database()
        url, self.conninfo = self.db.__enter__()
        self.env["LAG_DB"] = url
        app = make_app(self.system, self.redis_url, url)
        from alma_schedule.tasks import composition_of

        comp = composition_of(app)
        assert comp is not None
        # our settings loader refuses unknown ALMA_* variables: the bench's own (ALMA_BENCH_*) are
        # kept out while this process reads its settings, as they are out of every process it starts
        bench_env = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("ALMA_")}
        try:
            scheduler = comp.schedule()
        finally:
            os.environ.update(bench_env)
        for name, (kind, period, phase) in self.routines.items():
            definition = {"task": NOOP, "args": [name]}
            scheduler.register(RoutineSpec(ORG, UID, name, "task", alma_schedule_json(kind, period, phase), definition))
        comp.close()
        app.close()

    # ------------------------------------------------------------------ what it recorded
    def starts(self) -> list[tuple[str, str, float, float]]:
        """``(name, task id, published, started)`` of every ``bench.noop`` that started."""
        out = []
        for raw in self.r.lrange("lag:starts", 0, -1):
            name, task_id, pub, start = raw.decode().split()
            out.append((name, task_id, float(pub), float(start)))
        return out

    def ticks(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange("lag:ticks", 0, -1)]

    def result_keys(self) -> int:
        return sum(1 for _ in self.r.scan_iter(match="celery-task-meta-*", count=1000))

    def ledger(self) -> list[dict[str, Any]]:
        """Our runs (schedule origin) with their timestamps as epoch seconds."""
        cols = (
            "org, uid, routine_id, run_id, state, reason, fire_at, due_at, claimed_at, started_at, finished_at, owner"
        )
        with psycopg.connect(self.conninfo) as conn:
            rows = conn.execute(f"SELECT {cols} FROM runs WHERE origin = 'schedule'").fetchall()  # type: ignore[arg-type]
        names = [c.strip() for c in cols.split(",")]
        out = []
        for row in rows:
            rec = dict(zip(names, row, strict=True))
            for k, v in rec.items():
                if isinstance(v, datetime):
                    rec[k] = v.timestamp()
            out.append(rec)
        return out

    def anchors(self) -> dict[str, tuple[dict[str, Any], datetime]]:
        """Each routine's stored schedule and registration instant (its fires' anchor)."""
        with psycopg.connect(self.conninfo) as conn:
            rows = conn.execute("SELECT routine_id, schedule, registered_at FROM routines").fetchall()
        return {r[0]: (r[1] if isinstance(r[1], dict) else json.loads(r[1]), r[2]) for r in rows}

    def fires_missed(self) -> int | None:
        """``routines.fires_missed`` summed, where the store has the column (issue 44's counter)."""
        try:
            with psycopg.connect(self.conninfo) as conn:
                row = conn.execute("SELECT sum(fires_missed) FROM routines").fetchone()
        except psycopg.Error:
            return None
        return int(row[0] or 0) if row else 0

    # ------------------------------------------------------------------ stop
    def stop_clock(self) -> None:
        if self.clock is not None:
            stop(self.clock)
            self.clock = None

    def stop(self) -> None:
        self.stop_clock()
        for proc in self.procs:  # every worker's warm shutdown at once, then each waited for
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            stop(proc)
        self.procs = []
        if self.db is not None:
            self.db.__exit__(None, None, None)
            self.db = None
        self.r.flushdb()
