"""``scripts/bench --lag``: how late each fire's fleet task starts, in real time, system by system.

A no-op fleet task (``bench.noop``, ``bench/lag_fleet.py``), the README's worker layout, and the
systems one after another in one invocation (``bench/lag_systems.py``): celery beat, RedBeat and
alma-schedule with beat as the clock (``install(app, beat_clock=True)``, DEFAULT settings, ``celery
-A lag_fleet beat``) and with ``alma-schedule -A lag_fleet clock run``. Each fire's lag is the fleet
task's start minus its nominal instant (``bench/lag_stats.py``). The scenarios (sizes and minutes per
system as given; ``--quick`` is a smoke of under a minute that asserts nothing about speed):

* ``mix``: 100 routines (60 every minute, 20 every 10 s, 20 every 30 s); alma-schedule also with our
  runs on a thread pool of their own (layout ``runs``, ``bench/lag_systems.py``), as in ``herd10k``;
* ``spread`` / ``herd10k``: 10,000 routines, 1 % due per minute, spread over the minute (each an
  ``at``; RedBeat an interval with that phase) or as a :00 herd (100 every minute, the others yearly);
* ``herd``: 2,000 routines every minute (all due at the same instant), with our run side's cost per fire;
* ``busy``: ``mix`` while the fleet's ``-c 2`` pool runs one 2 s task every 2 s (half of it), our
  one-worker layout (``-Q alma.tick,alma.run,alma.collect,celery``) beside the dedicated tick worker;
* ``idle``: 100 routines none due: ticks, result keys and events per hour (under load: ``mix``'s).

    .venv-bench/bin/python bench/lag.py --redis redis://127.0.0.1:PORT/0 [--quick] [--scenarios mix]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import lag_report  # noqa: E402
import lag_stats  # noqa: E402

ALL = ("celery_beat", "redbeat", "alma_beat", "alma_clock")
#: name -> (default size, minutes per system, systems as (system, layout))
SCENARIOS: dict[str, tuple[int, float, tuple[tuple[str, str], ...]]] = {
    "mix": (100, 10.0, (*((s, "dedicated") for s in ALL), ("alma_beat", "runs"), ("alma_beat", "runs-unpacked"))),
    # mix's routines, with celery beat as the reference and our runs on a thread pool of their own only
    "mix-runs": (100, 10.0, (("celery_beat", "dedicated"), ("alma_beat", "runs"), ("alma_beat", "runs-unpacked"))),
    "spread": (10_000, 5.0, (("redbeat", ""), ("alma_beat", "dedicated"), ("alma_clock", "dedicated"))),
    "herd10k": (10_000, 5.0, (*((s, "dedicated") for s in ALL), ("alma_beat", "runs"))),
    "herd": (2_000, 3.0, tuple((s, "dedicated") for s in ALL)),
    "busy": (100, 5.0, (("celery_beat", ""), ("redbeat", ""), ("alma_beat", "shared"), ("alma_beat", "dedicated"))),
    "idle": (100, 2.0, (("alma_beat", "dedicated"), ("alma_clock", "dedicated"))),
}
GRACE = 90.0  # seconds after the window for late fires (a 60 s period's tick comes up to 60 s late)


def routines_for(scenario: str, n: int, t0: float) -> dict[str, tuple[str, float, float | None]]:
    """The routines of ``scenario`` at size ``n``; ``t0`` (a minute boundary) starts a spread."""
    out: dict[str, tuple[str, float, float | None]] = {}
    if scenario in ("mix", "mix-runs", "busy"):
        cron, tens = n * 6 // 10, n * 2 // 10
        for i in range(n):
            kind, period = ("cron", 60.0) if i < cron else ("every", 10.0 if i < cron + tens else 30.0)
            out[f"r{i:05d}"] = (kind, period, None)
    elif scenario == "spread":  # 1 % per minute: n routines over 100 minutes, whole seconds
        for i in range(n):
            out[f"r{i:05d}"] = ("at", 6000.0, float(t0 + math.floor(i * 6000.0 / n)))
    elif scenario == "herd10k":
        for i in range(n):
            out[f"r{i:05d}"] = ("cron", 60.0, None) if i < max(1, n // 100) else ("never", 0.0, None)
    elif scenario == "herd":
        out = {f"r{i:05d}": ("cron", 60.0, None) for i in range(n)}
    elif scenario == "idle":
        out = {f"r{i:05d}": ("never", 0.0, None) for i in range(n)}
    elif scenario == "smoke":  # --quick: sub-minute intervals only (no minute boundary to wait for)
        out = {f"r{i:05d}": ("every", 1.0 if i % 2 == 0 else 2.0, None) for i in range(n)}
    return out


def one_run(system: str, layout: str, scenario: str, routines: dict[str, Any], minutes: float, redis_url: str,
            pg_admin: str, *, quick: bool) -> dict[str, Any]:  # fmt: skip
    """Start one system, measure its window, stop it; the figures of :mod:`lag_stats`."""
    from lag_systems import Busy, Events, LagRun

    with tempfile.TemporaryDirectory(prefix="alma-lag-") as tmp:
        run = LagRun(system, routines, redis_url, pg_admin, Path(tmp), layout=layout or "dedicated")
        events = Events(redis_url) if scenario in ("mix", "idle", "smoke") else None
        busy = Busy(redis_url) if scenario == "busy" else None
        try:
            run.start()
            for extra in (events, busy):
                if extra is not None:
                    extra.start()
            ready = time.time()
            minute = any(k == "cron" for k, _p, _f in routines.values()) or scenario == "spread"
            ws = math.ceil((ready + 3.0) / 60.0) * 60.0 if minute else float(math.ceil(ready + 0.5))
            if scenario == "spread":  # the window starts with the spread
                ws = max(ws, min(float(p or 0.0) for _k, _p, p in routines.values()))
            we = ws + round(minutes * 60.0)
            time.sleep(max(0.0, ws - time.time()))
            keys0 = run.result_keys()
            time.sleep(max(0.0, we - time.time()))
            keys1 = run.result_keys()
            grace = 3.0 if quick else GRACE
            _wait_late(run, routines, ws, we, grace)
            run.stop_clock()
            starts, ticks = run.starts(), run.ticks()
            if run.alma:
                out = lag_stats.ours(routines, run.ledger(), run.anchors(), ticks, starts, ws, we)
                out["fires_missed_counter"] = run.fires_missed()
            else:
                out = lag_stats.incumbent(routines, run.phases, starts, ws, we)
            seconds = we - ws
            out.update(
                system=system, layout=layout, window_s=seconds, started=run.started, load_s=run.started["load_s"]
            )
            if events is not None:
                counted = events.count(ws, we)
                out["events_per_hour"] = lag_stats.per_hour(sum(counted.values()), seconds)
                out["task_events_per_hour"] = lag_stats.per_hour(
                    sum(v for k, v in counted.items() if k.startswith("task-")), seconds
                )
                out["events"] = counted
            out["result_keys_per_hour"] = lag_stats.per_hour(keys1 - keys0, seconds)
            out["ticks_per_hour"] = lag_stats.per_hour(sum(1 for t in ticks if ws <= t["start"] < we), seconds)
            if busy is not None:
                out["busy_sent"] = busy.sent
        finally:
            for extra in (busy, events):
                if extra is not None:
                    extra.stop()
            run.stop()
    return out


def _wait_late(run: Any, routines: dict[str, Any], ws: float, we: float, grace: float) -> None:
    """Past the window: wait until every fire with a known instant has started, or the grace ends."""
    if run.alma:
        expected = lag_stats.expected_ours(run.anchors(), ws, we)
    else:
        expected = lag_stats.expected_known(routines, run.phases, ws, we)
    deadline = we + grace
    time.sleep(min(3.0, grace / 2))
    while time.time() < deadline:
        if run.alma:
            got = lag_stats.started_ours(run.ledger(), run.starts(), ws, we)
        else:
            got = lag_stats.started_known(routines, run.phases, run.starts())
        if expected <= got:
            return
        time.sleep(1.0)


def section(redis_url: str, pg_admin: str, *, quick: bool, scenarios: list[str] | None = None,
            minutes: float | None = None, sizes: dict[str, int] | None = None,
            only: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The lag section: every scenario, each system one after another; ``--quick``: the smoke only."""
    os.environ["ALMA_BENCH_PG_ADMIN"] = pg_admin
    started = time.time()
    names = ["smoke"] if quick else (scenarios or list(SCENARIOS))
    out: dict[str, Any] = {"scenarios": {}, "quick": quick, "code": code()}  # the code as the section starts
    for name in names:
        if name == "smoke":
            size, mins, systems = (sizes or {}).get("smoke", 4), minutes or 4 / 60, tuple((s, "dedicated") for s in ALL)
        else:
            size, mins, systems = SCENARIOS[name]
            size, mins = (sizes or {}).get(name, size), minutes or mins
        runs = []
        for system, layout in systems:
            if only and system not in only:
                continue
            t = time.time()  # a spread starts at the next minute (registered before its instants)
            routines = routines_for(name, size, math.ceil((t + 5.0) / 60.0) * 60.0)
            res = one_run(system, layout, name, routines, mins, redis_url, pg_admin, quick=quick)
            res["wall_s"] = round(time.time() - t, 1)
            print(json.dumps({"scenario": name, **lag_report.brief(res)}), flush=True)
            runs.append(res)
        out["scenarios"][name] = {"routines": size, "minutes": mins, "runs": runs}
    out["targets"] = lag_report.targets(out["scenarios"])
    out["seconds"] = round(time.time() - started, 1)
    return out


def code() -> str:
    """The commit measured, and whether the package's files differ from it (a shared working tree)."""
    import subprocess

    git = ["git", "-C", str(HERE.parent)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "alma_schedule"], capture_output=True, text=True)
    except OSError:
        return "?"
    return head + (" + uncommitted changes in alma_schedule/" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--redis", required=True)
    ap.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--scenarios", default="", help=f"a subset of {','.join(SCENARIOS)}")
    ap.add_argument("--minutes", type=float, default=0.0, help="minutes of window per system (every scenario)")
    ap.add_argument("--sizes", default="", help="e.g. mix=100,herd=2000")
    ap.add_argument("--systems", default="", help=f"a subset of {','.join(ALL)} (development runs)")
    args = ap.parse_args(argv)
    keywords = parse_args(args.scenarios, args.minutes, args.sizes)
    only = [s for s in args.systems.split(",") if s]
    res = section(args.redis, args.pg_admin, quick=args.quick, only=only or None, **keywords)
    print(json.dumps(res, indent=1))
    print("\n".join(lag_report.markdown(res)))
    return 0


def parse_args(scenarios: str, minutes: float, sizes: str) -> dict[str, Any]:
    """``section``'s keywords from the command line's ``--lag-scenarios``, ``--lag-minutes``, ``--lag-sizes``."""
    names = [s for s in scenarios.split(",") if s]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown lag scenario {unknown[0]!r} (known: {', '.join(SCENARIOS)})")
    size = {k: int(v) for k, v in (p.split("=", 1) for p in sizes.split(",") if p)}
    return {"scenarios": names or None, "minutes": minutes or None, "sizes": size or None}


if __name__ == "__main__":
    raise SystemExit(main())
