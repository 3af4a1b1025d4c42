"""Micro-benchmark of the scheduling core: median microseconds per call.

    python bench/bench_core.py [--rounds 15] [--batch 300]
    python bench/bench_core.py --decide [--against REV] [--reps 9]

Times ``next_fire`` / ``latest_fire`` for crons in zones, ``every`` and ``at``, and a bare
``croniter(expr, t).get_next()`` / ``get_prev()`` in the same run on the same instants, then prints a
table and the croniter/ours ratios. Each figure is the median over rounds of (batch time / batch size),
over instants spread across 2025-2027 (so DST days and cold year tables are included); the caches of
computed fires are emptied before each round (:func:`forget_fires`), so a round times the computation.

``--decide``: the tick's per-routine ``decide`` over 1,000 due routines (the tick bench's
``DUE_SCHEDULES`` in turn, one in ten with one of ``bench/workload.py``'s policy mixes), in two fleets:
``shared`` (the tick bench's rows: one anchor and one cursor for all) and ``own`` (each routine
registered at its own second over 30 days, its cursor its own previous fire). Each timed pass is one
tick at a new ``now`` (one second later), so a pass finds only what earlier ticks left in the
caches; the first pass (a warm-up) is not counted. Also ``trusted(RunKey, ...)`` in ns. Each rep is
its own process; with ``--against REV`` the same measurement of the package as it is at git revision
``REV`` (exported with ``git archive``), the two interleaved rep by rep (the order alternating),
median/min/max over the reps.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from alma_schedule.core import At, Cron, Every, latest_fire, next_fire

CRONS = [("30 2 * * *", "America/New_York"), ("*/15 * * * *", "Europe/London"), ("0 9 * * mon-fri", "Asia/Kolkata")]
REGISTERED = datetime(2024, 1, 1, tzinfo=UTC)


def forget_fires() -> None:
    """Empty the caches of computed fires and instants (not the parsed crons nor the zone year
    tables), so each round times the computation, not a cache hit on the same instants."""
    from alma_schedule.core import fires, types

    for cache in (fires.cron_latest, fires.cron_next, fires._fire_text, types.from_epoch, types._utc_epoch):
        cache.cache_clear()


def median_us(fn: Callable[[datetime], object], instants: list[datetime], rounds: int) -> float:
    per_call = []
    for _ in range(rounds):
        forget_fires()
        start = time.perf_counter()
        for t in instants:
            fn(t)
        per_call.append((time.perf_counter() - start) / len(instants) * 1e6)
    return statistics.median(per_call)


FLEET = 1000
PASSES = 15


def fleet(shared: bool) -> list[Any]:
    """The due routines of the tick bench (``shared``) or the same mix with their own anchors."""
    from bench_tick import DUE_SCHEDULES, PREV, T
    from workload import SHARE, mixes

    from alma_schedule.core import parse_schedule
    from alma_schedule.model import Routine

    rng, out = random.Random(16), []
    for j in range(FLEET):
        i = j * 100  # the tick bench's step at 100,000 routines, 1,000 due
        schedule = dict(DUE_SCHEDULES[j % len(DUE_SCHEDULES)])
        if j % SHARE == 3:
            schedule.update(mixes(T)[(j // SHARE) % 6])
        reg, last = T - timedelta(hours=10), PREV
        if not shared:
            reg = T - timedelta(seconds=rng.randrange(30 * 86400))
            timing = parse_schedule(schedule)
            latest = latest_fire(timing, reg, T)
            last = None if latest is None else latest_fire(timing, reg, latest - timedelta(seconds=1))
        out.append(
            Routine(
                f"org{i % 97}",
                f"u{i % 1009}",
                f"r{i:08d}",
                "bench-due",
                schedule,
                {},
                registered_at=reg,
                config_revision="rev",
                last_fire=last,
                next_due_at=T,
            )
        )
    return out


def measure_once() -> dict[str, float]:
    """One process's figures: median us per routine over the passes, per fleet; ns per trusted key."""
    from bench_tick import NOW

    from alma_schedule.engine import decide
    from alma_schedule.model.keys import RunKey, trusted
    from alma_schedule.settings import Settings

    settings, out = Settings(), {}
    for name in ("shared", "own"):
        routines, per_pass = fleet(name == "shared"), []
        for p in range(PASSES + 1):  # pass 0 warms what any process has after its first ticks
            now = NOW + timedelta(seconds=p)
            start = time.perf_counter()
            for r in routines:
                decide(r, now, settings)
            per_pass.append((time.perf_counter() - start) / len(routines) * 1e6)
        out[f"decide_{name}_us"] = statistics.median(per_pass[1:])
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        trusted(RunKey, "org1", "u1", "r00000100", "2026-06-01T12:00:00Z")
    out["trusted_ns"] = (time.perf_counter() - start) / n * 1e9
    return out


def compare(against: str | None, reps: int) -> None:
    """``reps`` processes per variant, interleaved (the order alternating); median/min/max per figure."""
    here = Path(__file__).resolve().parent
    variants = {"this tree": None}
    with tempfile.TemporaryDirectory() as tmp:
        if against:
            archive = subprocess.run(
                ["git", "-C", str(here.parent), "archive", against, "alma_schedule"], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            variants = {against: tmp, "this tree": None}
        results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for rep in range(reps):
            order = list(variants) if rep % 2 == 0 else list(variants)[::-1]
            for v in order:
                env = dict(os.environ)
                if variants[v] is not None:
                    env["PYTHONPATH"] = str(variants[v])
                run = subprocess.run(
                    [sys.executable, str(here / "bench_core.py"), "--decide-once"],
                    check=True,
                    capture_output=True,
                    text=True,
                    env=env,
                )
                answer = json.loads(run.stdout)
                expected = Path(variants[v] or here.parent) / "alma_schedule"
                if Path(answer["package"]) != expected.resolve():
                    raise SystemExit(f"{v}: imported {answer['package']}, not {expected}")
                results[v].append(answer["figures"])
    print(f"{FLEET} due routines, {PASSES} ticks per process, {reps} processes per variant (interleaved)")
    print(f"{'figure':18} {'variant':>14} {'median':>9} {'min':>9} {'max':>9}")
    for key in results["this tree"][0]:
        for v, rows in results.items():
            xs = [r[key] for r in rows]
            print(f"{key:18} {v:>14} {statistics.median(xs):9.2f} {min(xs):9.2f} {max(xs):9.2f}")
        if against:
            ratio = statistics.median(r[key] for r in results[against]) / statistics.median(
                r[key] for r in results["this tree"]
            )
            print(f"{key:18} {'ratio':>14} {ratio:8.1f}x  ({against} / this tree)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--decide", action="store_true", help="per-routine decide (and trusted) instead")
    parser.add_argument("--against", metavar="REV", help="with --decide: also the package at git revision REV")
    parser.add_argument("--reps", type=int, default=9, help="with --decide: processes per variant")
    parser.add_argument("--decide-once", action="store_true", help=argparse.SUPPRESS)  # one rep, as JSON
    args = parser.parse_args()
    if args.decide_once:
        import alma_schedule

        print(json.dumps({"figures": measure_once(), "package": str(Path(alma_schedule.__file__).parent)}))
        return
    if args.decide:
        compare(args.against, args.reps)
        return
    from croniter import croniter

    rng = random.Random(20260)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    instants = [base + timedelta(seconds=rng.randrange(3 * 365 * 86400)) for _ in range(args.batch)]

    rows: list[tuple[str, float, float | None]] = []
    for expr, tz in CRONS:
        cron, zone = Cron(expr, tz), ZoneInfo(tz)
        for label, ours, ref in (
            (
                "next",
                lambda t, c=cron: next_fire(c, REGISTERED, t),
                lambda t, e=expr, z=zone: croniter(e, t.astimezone(z)).get_next(datetime),
            ),
            (
                "latest",
                lambda t, c=cron: latest_fire(c, REGISTERED, t),
                lambda t, e=expr, z=zone: croniter(e, t.astimezone(z)).get_prev(datetime),
            ),
        ):
            median_us(ours, instants, 1)  # warm caches (parsed spec, zone year tables)
            rows.append(
                (
                    f"cron {label:6} {expr!r} {tz}",
                    median_us(ours, instants, args.rounds),
                    median_us(ref, instants, max(3, args.rounds // 3)),
                )
            )
    every = Every(timedelta(minutes=15))
    at = At(datetime(2026, 6, 1, tzinfo=UTC))
    for name, sched in (("every 15m", every), ("at", at)):
        rows.append(
            (f"{name} next", median_us(lambda t, s=sched: next_fire(s, REGISTERED, t), instants, args.rounds), None)
        )
        rows.append(
            (f"{name} latest", median_us(lambda t, s=sched: latest_fire(s, REGISTERED, t), instants, args.rounds), None)
        )

    width = max(len(r[0]) for r in rows)
    print(f"{'case':{width}}  {'ours µs':>9}  {'croniter µs':>11}  {'ratio':>6}")
    print("-" * (width + 34))
    for name, ours_us, ref_us in rows:
        ref_txt = f"{ref_us:11.1f}" if ref_us is not None else f"{'-':>11}"
        ratio = f"{ref_us / ours_us:5.1f}x" if ref_us is not None else f"{'':>6}"
        print(f"{name:{width}}  {ours_us:9.2f}  {ref_txt}  {ratio}")
    print(f"\n{args.batch} instants in 2025-2027, median of {args.rounds} rounds; ratio = croniter / ours.")
    print("targets: cron next/latest < 50 µs, every/at < 5 µs")


if __name__ == "__main__":
    main()
