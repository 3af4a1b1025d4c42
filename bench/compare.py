"""``scripts/bench``: alma-schedule's tick against RedBeat, celery beat, django-celery-beat,
sqlalchemy-celery-beat and the physical floor.

Every system ticks the same instant with the same due count (1 % of the routines) and really
publishes its messages to the bench's own Redis (started by ``scripts/bench``): the count that
reached Redis is checked against each tick's. Each cell is the median of interleaved repetitions
(A B C D, A B C D, ...; state reset, untimed, before each), with min and max; ratios are taken pair
by pair within a repetition, then their median. After its first repetition a system runs another
only while its repetitions so far took under the repetition budget (5 min; ``--quick``: 15 s), so a
slow incumbent's cell may show fewer repetitions (said in the cell). What one tick is, for each:

* alma-schedule: the ``alma_schedule.tick`` task called directly in this process, over a
  PostgreSQL store (a database of its own on the given server) whose due routines mix schedule
  kinds; of the due routines 10 % have a pending ``claimed`` run (superseded) and 10 % a
  ``running`` one (overlap); 10 % of all routines carry schedule policies (``bench/workload.py``:
  ``catch_up``, ``overlap: latest``, ``max_runs``, ``jitter``, ``not_before``/``not_after`` and a
  mix, each still firing at the instant; an ``overlap: latest`` routine with a running run buffers
  its fire). The process has ticked before (warm prepared statements), and the store has
  recorded its zone data (a long-lived fleet, as ``bench/scale.py``'s: no zone data walk left).
* RedBeat: one ``RedBeatScheduler.tick()`` over N entries in Redis (it sends every due entry of its
  sorted set in one call), the due ones due at the instant.
* celery beat: ``PersistentScheduler.tick()`` called until it has sent every due entry (one entry
  per call, each call O(N)); its shelve sync is not in the tick.
* django-celery-beat / sqlalchemy-celery-beat (``bench/compare_incumbents.py``): their
  ``DatabaseScheduler`` on PostgreSQL, ``tick()`` until it returns a wait, then ``sync()`` (the
  write-back of the sent entries, one SELECT + UPDATE each). A tick still running after 5 minutes
  is stopped and the cell says "did not finish in 5 min".
* floor: one transaction (indexed ``SELECT ... FOR UPDATE SKIP LOCKED`` of the due rows, one
  ``INSERT`` of the run rows, one ``UPDATE`` of the cursors) on two minimal tables, then one
  pipelined ``LPUSH`` of Celery-shaped messages.

Every system's Celery app publishes a ``task-sent`` event with each task message (Flower sees the
sends): our default (``task_events``) and ``task_send_sent_event`` on each incumbent's app, so that
each system does the same broker work; ``--task-events off`` turns it off on every side (the results
file says which). The floor sends no event.

Then growth in N at fixed due counts (``bench/compare_growth.py``: ours, RedBeat and the floor at
due 0 / 100 / 1,000 for N 1,000 / 10,000 / 100,000; ``--quick``: due 0 / 10 / 100 for N 1,000 /
10,000).

With ``--scale N,N`` also the tick at scale (``bench/scale.py``: ours against OUR floor on our own
schema and ledger, batch linearity, two workers, the tick worker's peak memory); ``--scale-only``
runs that section alone.

Last, the lag section (``bench/lag.py``): each fire's fleet task start against its instant, in real
time, celery beat, RedBeat and our two clocks one after another (about 2 h 15 min; not in ``--quick``).
``--lag`` runs that section alone (``--lag --quick``: its smoke, under a minute), with
``--lag-scenarios``, ``--lag-minutes`` and ``--lag-sizes`` to make it smaller.

And the auth flood (``bench/bench_auth_flood.py``, issue 45): ``/healthz``'s latency and serve-http's
memory while 200 wrong dashboard logins arrive 50 at once (under a minute; not in ``--quick``).
``--auth-flood`` runs that section alone.

Writes ``bench/results/<date>.md`` and ``.json`` (machine, every system's version, every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare_growth as growth  # noqa: E402
import compare_incumbents as incumbents  # noqa: E402
import compare_systems as systems  # noqa: E402
import workload  # noqa: E402


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    dists = ("alma-schedule", "celery", "kombu", "redis", "celery-redbeat", "psycopg", "sqlalchemy", *incumbents.DISTS)
    for dist in dists:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "-"
    return out


def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release()}


def stats(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def run_size(
    n: int, reps: int, redis_url: str, pg_admin: str, beat_max: int, rep_budget: float = 300.0
) -> dict[str, Any]:
    due = max(1, n // 100)
    r = redis.Redis.from_url(redis_url)
    contenders: dict[str, systems.System] = {
        "alma": systems.Alma(n, due, redis_url, pg_admin),
        "redbeat": systems.RedBeat(n, due, redis_url),
        "floor": systems.Floor(n, due, redis_url, pg_admin),
    }
    if n <= beat_max:
        contenders["celery_beat"] = systems.CeleryBeat(n, due, redis_url)
    contenders.update(incumbents.contenders(n, due, redis_url, pg_admin))
    times: dict[str, list[float]] = {k: [] for k in contenders}
    stopped: dict[str, str] = {}
    started = time.perf_counter()
    try:
        for system in contenders.values():
            system.setup()
            system.warm()  # a long-lived process that has ticked before
            systems.drain(r)
        for _ in range(reps):
            for name, system in contenders.items():
                if name in stopped or not incumbents.within_budget(times[name], rep_budget):
                    continue
                system.reset()
                systems.drain(r)
                t0 = time.perf_counter()
                try:
                    sent = system.tick()
                except incumbents.DidNotFinish as exc:
                    stopped[name] = str(exc)
                    continue
                times[name].append(time.perf_counter() - t0)
                published = systems.published(r)
                if published != sent:
                    raise SystemExit(f"{name} at {n}: published {published}, expected {sent} ({due} due)")
    finally:
        for system in contenders.values():
            system.teardown()
        r.flushdb()
    cell: dict[str, Any] = {"routines": n, "due": due, "reps": reps, "wall_s": round(time.perf_counter() - started, 1)}
    for name, xs in times.items():
        cell[name] = stopped.get(name) or {k: round(v * 1e3, 2) for k, v in stats(xs).items()}
        if isinstance(cell[name], dict) and len(xs) < reps:
            cell[name]["reps"] = len(xs)
    pair: Callable[[str, str], float | None] = lambda a, b: (  # noqa: E731
        round(statistics.median(x / y for x, y in zip(times[a], times[b], strict=False)), 2)
        if times.get(a) and times.get(b)
        else None
    )
    cell["redbeat_over_ours"] = pair("redbeat", "alma")
    cell["ours_over_floor"] = pair("alma", "floor")
    cell["beat_over_ours"] = pair("celery_beat", "alma")
    for name in incumbents.NAMES:
        cell[f"{name}_over_ours"] = pair(name, "alma")
    if "celery_beat" not in times:
        cell["celery_beat"] = f"not run: above {beat_max:,} routines (one tick() per due entry, each O(N))"
    return cell


def markdown(result: dict[str, Any]) -> str:
    m, v = result["machine"], result["versions"]
    lines = [
        f"# Benchmark {result['date']} ({result['command']})",
        "",
        f"Machine: {m['host']}, {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}.",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".",
    ]
    if result["cells"] or "lag" not in result:  # a lag-only run (--lag) has no tick cells
        lines += [
            "",
            "Each cell: median (min-max) of interleaved repetitions, ms; ratios pair by pair.",
            "Task-sent events: "
            + (
                "on for every system (our default `task_events`; `task_send_sent_event` on the incumbents' apps)."
                if result.get("task_events", True)
                else "off for every system (`--task-events off`)."
            ),
        ]
    if result["cells"]:
        lines += [
            "",
            "| routines | due | reps | alma-schedule | RedBeat | celery beat | django-celery-beat "
            "| sqlalchemy-celery-beat | floor | RedBeat / ours | django-celery-beat / ours "
            "| sqlalchemy-celery-beat / ours | ours / floor |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]

    def fmt(c: Any) -> str:
        if isinstance(c, str) and not c.startswith("not run"):
            return c  # stopped at the deadline
        if not isinstance(c, dict):
            return "—"
        reps = f", {c['reps']} rep{'s' if c['reps'] != 1 else ''}" if "reps" in c else ""
        return f"{c['median']:,.1f} ({c['min']:,.1f}-{c['max']:,.1f}{reps})"

    lines += [
        f"| {c['routines']:,} | {c['due']:,} | {c['reps']} | {fmt(c['alma'])} | {fmt(c['redbeat'])} | "
        f"{fmt(c.get('celery_beat'))} | {fmt(c.get('django_celery_beat'))} | {fmt(c.get('sqla_celery_beat'))} | "
        f"{fmt(c['floor'])} | {c['redbeat_over_ours']} | {c.get('django_celery_beat_over_ours') or '—'} | "
        f"{c.get('sqla_celery_beat_over_ours') or '—'} | {c['ours_over_floor']} |"
        for c in result["cells"]
    ]
    notes = [c["celery_beat"] for c in result["cells"] if isinstance(c.get("celery_beat"), str)]
    if notes:
        lines += ["", f"celery beat: {notes[0]}."]
    if result["cells"]:
        lines += ["", incumbents.NOTE, "", workload.NOTE]
    if result.get("growth"):
        lines += growth.markdown(result["growth"])
    if result.get("round_trips"):
        lines += ["", "Idle tick, counted in-process: " + json.dumps(result["round_trips"])]
    if result.get("idle_worker"):
        lines += ["", "Idle worker's own broker traffic (Redis INFO deltas): " + json.dumps(result["idle_worker"])]
    if result.get("e2e"):
        from e2e import markdown as e2e_markdown

        lines += e2e_markdown(result["e2e"])
    if "scale" in result:
        import scale

        lines += ["", *scale.markdown(result["scale"])]
    if result.get("lag"):
        import lag_report  # the lag section: bench/lag.py

        lines += lag_report.markdown(result["lag"])
    if result.get("auth_flood"):
        import bench_auth_flood  # the auth flood: bench/bench_auth_flood.py

        lines += bench_auth_flood.markdown(result["auth_flood"])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="alma-schedule against RedBeat, celery beat and the floor")
    ap.add_argument("--quick", action="store_true", help="1,000 and 10,000 routines, 3 repetitions")
    ap.add_argument("--sizes", default="")
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--redis", required=True)
    ap.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--beat-max", type=int, default=10_000)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--scale", default="", help="the scale section's sizes (bench/scale.py), e.g. 100000,1000000")
    ap.add_argument("--scale-only", action="store_true", help="only the scale section")
    ap.add_argument(
        "--task-events", choices=("on", "off"), default="on",
        help="task-sent events with every message, on every system's app (default on: our default)",
    )  # fmt: skip
    ap.add_argument("--lag", action="store_true", help="only the lag section (bench/lag.py); with --quick its smoke")
    ap.add_argument("--lag-scenarios", default="", help="the lag section's scenarios, e.g. mix,herd")
    ap.add_argument("--lag-minutes", type=float, default=0.0, help="minutes of window per system, every scenario")
    ap.add_argument("--lag-sizes", default="", help="routines per lag scenario, e.g. mix=100,herd=2000")
    ap.add_argument("--auth-flood", action="store_true", help="only the auth flood (bench/bench_auth_flood.py)")
    args = ap.parse_args(argv)
    if args.lag:
        return lag_only(args)
    if args.auth_flood:
        return auth_flood_only(args)
    systems.TASK_EVENTS = args.task_events == "on"
    default = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    sizes = [int(s) for s in args.sizes.split(",") if s] or default
    reps = args.reps or (3 if args.quick else 7)
    started = time.perf_counter()
    cells = []
    for n in [] if args.scale_only else sizes:
        cell = run_size(n, reps, args.redis, args.pg_admin, args.beat_max, 15.0 if args.quick else 300.0)
        print(json.dumps(cell), flush=True)
        cells.append(cell)
    g_sizes, g_dues = (growth.QUICK_SIZES, growth.QUICK_DUES) if args.quick else (growth.SIZES, growth.DUES)
    grown = None if args.scale_only else growth.run(g_sizes, g_dues, reps, args.redis, args.pg_admin, cells)
    os.environ["ALMA_BENCH_REDIS"] = args.redis.rsplit("/", 1)[0]  # the bench's own Redis
    os.environ["ALMA_BENCH_PG_ADMIN"] = args.pg_admin
    from round_trips import TICKS, WARM, count
    from worker_idle import measure as worker_idle

    trips = idle_worker = end_to_end = None
    if not args.scale_only:
        trips = count(1_000, WARM, TICKS)
        idle_worker = worker_idle(args.redis, 1_000, 20 if args.quick else 60, 5, [])
        import e2e  # the end-to-end section: bench/e2e.py (10,000 fires over 100,000 routines; --quick: 1,000 / 10,000)

        end_to_end = e2e.section(args.redis, args.pg_admin, quick=args.quick)
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    command = "scripts/bench" + (" --quick" if args.quick else "") + (f" --sizes {args.sizes}" if args.sizes else "")
    command += (f" --scale {args.scale}" if args.scale else "") + (" --scale-only" if args.scale_only else "")
    command += f" --reps {args.reps}" if args.reps else ""
    command += " --task-events off" if not systems.TASK_EVENTS else ""
    command += f" --lag-scenarios {args.lag_scenarios}" if args.lag_scenarios else ""
    command += f" --lag-minutes {args.lag_minutes:g}" if args.lag_minutes else ""
    command += f" --lag-sizes {args.lag_sizes}" if args.lag_sizes else ""
    result = {
        "date": date, "command": command, "machine": machine(), "versions": versions(), "cells": cells,
        "growth": grown, "round_trips": trips, "idle_worker": idle_worker, "e2e": end_to_end,
        "seconds": round(time.perf_counter() - started, 1), "task_events": systems.TASK_EVENTS,
    }  # fmt: skip
    if args.scale:
        import scale

        result["scale"] = scale.run([int(x) for x in args.scale.split(",") if x], reps, args.redis, args.pg_admin)
        result["seconds"] = round(time.perf_counter() - started, 1)
    if not args.quick and not args.scale_only:  # the auth flood, then the lag section in real time (bench/lag.py)
        import bench_auth_flood

        result["auth_flood"] = bench_auth_flood.section()
        result["lag"] = run_lag(args)
        result["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = date + ("-quick" if args.quick else "") + ("-scale" if args.scale_only else "")
    stem += "" if systems.TASK_EVENTS else "-events-off"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(result))
    print(markdown(result))
    return 0


def run_lag(args: argparse.Namespace) -> dict[str, Any]:
    import lag

    keywords = lag.parse_args(args.lag_scenarios, args.lag_minutes, args.lag_sizes)
    return lag.section(args.redis, args.pg_admin, quick=args.quick, **keywords)


def lag_only(args: argparse.Namespace) -> int:
    """``scripts/bench --lag [--quick]``: the lag section alone, written as ``<date>-lag[-quick]``."""
    started = time.perf_counter()
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    command = "scripts/bench --lag" + (" --quick" if args.quick else "")
    command += f" --lag-scenarios {args.lag_scenarios}" if args.lag_scenarios else ""
    command += f" --lag-minutes {args.lag_minutes:g}" if args.lag_minutes else ""
    command += f" --lag-sizes {args.lag_sizes}" if args.lag_sizes else ""
    result: dict[str, Any] = {"date": date, "command": command, "machine": machine(), "versions": versions(),
                              "cells": [], "lag": run_lag(args)}  # fmt: skip
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{date}-lag" + ("-quick" if args.quick else "")
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(result))
    print(markdown(result))
    return 0


def auth_flood_only(args: argparse.Namespace) -> int:
    """``scripts/bench --auth-flood``: the auth flood alone, written as ``<date>-auth-flood``."""
    import bench_auth_flood

    started = time.perf_counter()
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    result: dict[str, Any] = {"date": date, "command": "scripts/bench --auth-flood", "machine": machine(),
                              "versions": versions(), "cells": [], "lag": None,
                              "auth_flood": bench_auth_flood.section()}  # fmt: skip
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{date}-auth-flood.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{date}-auth-flood.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
