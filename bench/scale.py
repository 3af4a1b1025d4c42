"""The tick at scale (issue 16): ours against OUR floor and the minimal floor, batch linearity, two
workers against one (with a CPU-bound control pair), and the peak memory of a real tick worker.

One migrated database (our real schema) holds N routines and N FINISHED runs (both by COPY); it is
reused for every repetition, reset (untimed) before each tick: 1 % of the routines due, of those
10 % with a pending ``claimed`` run (superseded) and 10 % a ``running`` one (overlap).

* ours: the ``alma_schedule.tick`` task called in this long-lived process (it has ticked before:
  warm prepared statements), each claim batch timed;
* our floor: :class:`scale_systems.OurFloor` (the minimal floor's three statements on our tables);
* minimal floor: :class:`compare_systems.Floor` (two minimal tables of its own);
* linearity: ours with ``claim_limit`` due (one batch) against 10x that (10 batches);
* two workers: two long-lived worker processes tick at once (wall time until both are done) against
  one alone; the ledger is checked after each (every due routine has exactly one row at the fire);
  control: two processes of pure Python work against one;
* memory: VmHWM of the pool child of a real prefork ``celery worker`` after 8 ticks (reset between).

    .venv/bin/python bench/scale.py --redis redis://127.0.0.1:6379/9 --sizes 100000,1000000 --reps 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare_systems as cs  # noqa: E402
import scale_systems as ss  # noqa: E402

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def stats(xs: list[float], scale: float = 1e3) -> dict[str, Any]:
    return {
        "median": round(statistics.median(xs) * scale, 2), "min": round(min(xs) * scale, 2),
        "max": round(max(xs) * scale, 2), "reps": len(xs),
    }  # fmt: skip


def ratio(a: list[float], b: list[float]) -> dict[str, Any]:
    """Pair by pair within a repetition, then median (min, max)."""
    return stats([x / y for x, y in zip(a, b, strict=True)], 1)


def timed(system: cs.System, r: redis.Redis, what: str) -> float:
    system.reset()
    cs.drain(r)
    t0 = time.perf_counter()
    sent = system.tick()
    took = time.perf_counter() - t0
    if cs.published(r) != sent:
        raise SystemExit(f"{what}: published {cs.published(r)}, expected {sent}")
    return took


def contenders(db: ss.Loaded, redis_url: str, reps: int, minimal: bool) -> dict[str, Any]:
    """Ours, our floor, the minimal floor, interleaved; then ours at one batch against ten."""
    r = redis.Redis.from_url(redis_url)
    due = db.due_max
    ours, floor = ss.Ours(db, redis_url), ss.OurFloor(db, redis_url, pack=20)
    systems: dict[str, cs.System] = {"ours": ours, "our_floor": floor}
    if minimal:
        systems["minimal_floor"] = cs.Floor(db.n, due, redis_url, db.pg_admin)
    times: dict[str, list[float]] = {k: [] for k in systems}
    batches: list[list[float]] = []
    one: list[float] = []
    ten: list[float] = []
    try:
        for system in systems.values():
            system.setup()
            system.warm()
        ours.batch_size = floor.pack = ours.app.conf.alma_scale_batch
        for _ in range(reps):
            for name, system in systems.items():
                times[name].append(timed(system, r, name))
                if system is ours:
                    batches.append(list(ours.batches))
        limit = ours.app.conf.get("alma_scale_limit", 1000)
        if due >= 10 * limit:
            for _ in range(reps):
                ours.due = limit
                one.append(timed(ours, r, "ours, one batch"))
                ours.due = 10 * limit
                ten.append(timed(ours, r, "ours, ten batches"))
            ours.due = due
    finally:
        for system in systems.values():
            system.teardown()
        cs.drain(r)
    cell: dict[str, Any] = {"routines": db.n, "due": due, **{k: stats(v) for k, v in times.items()}}
    cell["ours_over_our_floor"] = ratio(times["ours"], times["our_floor"])
    if minimal:
        cell["ours_over_minimal_floor"] = ratio(times["ours"], times["minimal_floor"])
        cell["our_floor_over_minimal_floor"] = ratio(times["our_floor"], times["minimal_floor"])
    per_batch = [b for rep in batches for b in rep]
    cell["claim_batches"] = {"per_tick": len(batches[0]) if batches else 0, "each_ms": stats(per_batch)}
    if one:
        cell["linearity"] = {"one_batch": stats(one), "ten_batches": stats(ten), "ten_over_one": ratio(ten, one)}
    return cell


def _child_cmd(db: ss.Loaded, redis_url: str) -> list[str]:
    return [
        sys.executable, str(Path(__file__)), "child", "--db", db.name, "--n", str(db.n), "--due", str(db.due_max),
        "--redis", redis_url, "--pg-admin", db.pg_admin,
    ]  # fmt: skip


def child(args: argparse.Namespace) -> int:
    """A long-lived tick worker: on each line ``tick`` it ticks once and answers its report."""
    db = ss.Loaded(args.n, args.due, args.pg_admin, name=args.db)
    ours = ss.Ours(db, args.redis)
    ours.setup()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "tick":
            break
        t0 = time.perf_counter()
        report = ours._tick(now=ss.bt.NOW.isoformat())
        took = time.perf_counter() - t0
        print(json.dumps({"s": took, "claimed": report["claimed"], "errors": report["errors"]}), flush=True)
    ours.teardown()
    return 0


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def workers(db: ss.Loaded, redis_url: str, reps: int) -> dict[str, Any]:
    """Two long-lived workers ticking at once against one alone; the ledger checked each time."""
    r = redis.Redis.from_url(redis_url)
    procs = [subprocess.Popen(_child_cmd(db, redis_url), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]  # fmt: skip
    ledgers: list[dict[str, int]] = []

    def tick(chosen: list[subprocess.Popen[str]]) -> float:
        db.reset(db.due_max)
        cs.drain(r)
        t0 = time.perf_counter()
        for p in chosen:
            assert p.stdin is not None
            p.stdin.write("tick\n")
            p.stdin.flush()
        answers = [json.loads(p.stdout.readline()) for p in chosen if p.stdout is not None]
        took = time.perf_counter() - t0
        ledger = db.ledger()
        claimed = sum(int(a["claimed"]) for a in answers)
        rows = sum(v for k, v in ledger.items() if k != "routines_twice")
        if ledger["routines_twice"] or rows != db.due_max or ledger.get("claimed", 0) != claimed:
            raise SystemExit(f"ledger after {len(chosen)} worker(s): {ledger}, reported claimed {claimed}")
        ledgers.append({**ledger, "workers": len(chosen), "claimed_by": [int(a["claimed"]) for a in answers]})
        return took

    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for _ in range(3):  # warm both
            tick(procs)
        one, two = [], []
        for _ in range(reps):
            one.append(tick(procs[:1]))
            two.append(tick(procs))
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=60)
        cs.drain(r)
    ctl1, ctl2 = [], []
    spin = 6_000_000
    for _ in range(reps):
        ctl1.append(_control(1, spin))
        ctl2.append(_control(2, spin))
    return {
        "routines": db.n, "due": db.due_max, "one": stats(one), "two": stats(two), "two_over_one": ratio(two, one),
        "control_one": stats(ctl1), "control_two": stats(ctl2), "control_two_over_one": ratio(ctl2, ctl1),
        "ledger_last_two": ledgers[-1],
    }  # fmt: skip


def _control(k: int, spin: int) -> float:
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import scale; scale._spin({spin})"
    t0 = time.perf_counter()
    ps = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(k)]
    for p in ps:
        p.wait()
    return time.perf_counter() - t0


def memory(db: ss.Loaded, redis_url: str, ticks: int = 8) -> dict[str, Any]:
    """VmHWM of a real prefork ``celery worker``'s pool child (concurrency 1) after ``ticks`` ticks."""
    from alma_schedule.model import TICK_TASK

    env = {**os.environ, "ALMA_SCALE_DB_URL": db.url, "ALMA_SCALE_REDIS": redis_url, "PYTHONPATH": str(HERE)}
    cmd = [sys.executable, "-m", "celery", "-A", "scale_app", "worker", "-P", "prefork", "-c", "1", "-Q", "alma.tick",
           "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
    worker = subprocess.Popen(cmd, env=env, cwd=str(HERE))
    app = ss.make_app(db.url, redis_url)
    r = redis.Redis.from_url(redis_url)
    claimed = []
    kids_file = Path(f"/proc/{worker.pid}/task/{worker.pid}/children")
    try:
        deadline = time.monotonic() + 120
        while not kids_file.read_text().split() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # the pool child has started: its footprint before any task
        idle = {pid: _status(pid) for pid in kids_file.read_text().split()}
        for _ in range(ticks):
            db.reset(db.due_max)
            cs.drain(r)
            result = app.send_task(TICK_TASK, kwargs={"now": ss.bt.NOW.isoformat()}, queue="alma.tick")
            report = result.get(timeout=600)
            claimed.append(int(report["claimed"]))
        kids = kids_file.read_text().split()
        status = {pid: _status(pid) for pid in kids}
        parent = _status(str(worker.pid))
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        cs.drain(r)
    return {
        "routines": db.n,
        "ticks": ticks,
        "claimed_each": claimed,
        "pool_children": status,
        "pool_idle": idle,
        "main": parent,
    }


def _status(pid: str) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM", "VmRSS")):
            name, value = line.split(":", 1)
            out[name + "_mb"] = round(int(value.split()[0]) / 1024)
    return out


def run(sizes: list[int], reps: int, redis_url: str, pg_admin: str, *, keep: str | None = None,
        parts: str = "contenders,workers,memory") -> dict[str, Any]:  # fmt: skip
    """Every measurement for each size (``compare.py``'s scale section calls this)."""
    out: dict[str, Any] = {"cells": []}
    for n in sizes:
        name = keep if keep and n == max(sizes) else None
        db = ss.Loaded(n, n // 100, pg_admin, name=name)
        t0 = time.perf_counter()
        if name is not None and ss.bt.exists(name):
            db.ids()
        else:
            if name is not None:
                ss.bt.admin(f'CREATE DATABASE "{name}"')
            db.load()
        cell: dict[str, Any] = {"routines": n, "load_s": round(time.perf_counter() - t0, 1)}
        try:
            if "contenders" in parts:
                cell["tick"] = contenders(db, redis_url, reps, minimal=True)
                print(json.dumps(cell["tick"]), flush=True)
            if n >= 1_000_000 or n == max(sizes):
                if "workers" in parts:
                    cell["workers"] = workers(db, redis_url, reps)
                    print(json.dumps(cell["workers"]), flush=True)
                if "memory" in parts:
                    cell["memory"] = memory(db, redis_url)
                    print(json.dumps(cell["memory"]), flush=True)
        finally:
            if name is None:
                db.drop()
        out["cells"].append(cell)
    return out


def _f(c: dict[str, Any]) -> str:
    return f"{c['median']:,.1f} ({c['min']:,.1f}-{c['max']:,.1f}, {c['reps']} reps)"


def _r(c: dict[str, Any]) -> str:
    return f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})"


def markdown(result: dict[str, Any]) -> list[str]:
    """The scale section of ``bench/results/<date>.md``: ms, median (min-max, reps); ratios pair by pair."""
    lines = [
        "## The tick at scale (bench/scale.py)", "",
        "| routines | due | ours | our floor | minimal floor | ours / our floor | ours / minimal floor |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for cell in result["cells"]:
        t = cell.get("tick")
        if t:
            lines.append(
                f"| {t['routines']:,} | {t['due']:,} | {_f(t['ours'])} | {_f(t['our_floor'])} | "
                f"{_f(t['minimal_floor'])} | {_r(t['ours_over_our_floor'])} | {_r(t['ours_over_minimal_floor'])} |"
            )
    for cell in result["cells"]:
        t, w, m = cell.get("tick", {}), cell.get("workers"), cell.get("memory")
        n = f"{cell['routines']:,} routines"
        if "linearity" in t:
            li, each = t["linearity"], t["claim_batches"]["each_ms"]
            lines += ["", f"{n}, linearity: one claim batch {_f(li['one_batch'])}, ten {_f(li['ten_batches'])}, "
                      f"ten / one {_r(li['ten_over_one'])}; each batch of a tick {_f(each)}."]  # fmt: skip
        if w:
            ledger = json.dumps(w["ledger_last_two"])
            lines += ["", f"{n}, {w['due']:,} due, two workers at once: one {_f(w['one'])}, two {_f(w['two'])}, "
                      f"two / one {_r(w['two_over_one'])}; control pair (pure Python) two / one "
                      f"{_r(w['control_two_over_one'])}; ledger after the last pair: {ledger}."]  # fmt: skip
        if m:
            idle = json.dumps(m["pool_idle"])
            lines += ["", f"{n}, peak memory of the prefork tick worker's pool child after {m['ticks']} ticks: "
                      f"{json.dumps(m['pool_children'])} (before its first task {idle})."]  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", default="run", choices=("run", "child"))
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--redis", required=True)
    ap.add_argument("--pg-admin", default=os.environ.get("ALMA_BENCH_PG_ADMIN", PG_ADMIN))
    ap.add_argument("--parts", default="contenders,workers,memory")
    ap.add_argument("--keep", default=None, help="reuse (or keep) this database for the largest size")
    ap.add_argument("--out", default="")
    ap.add_argument("--db", default="")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--due", type=int, default=0)
    args = ap.parse_args(argv)
    if args.mode == "child":
        return child(args)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    result = run(sizes, args.reps, args.redis, args.pg_admin, keep=args.keep, parts=args.parts)
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
