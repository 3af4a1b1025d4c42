"""Micro-benchmark of the scheduling core: median microseconds per call.

    python bench/bench_core.py [--rounds 15] [--batch 300]

Times ``next_fire`` / ``latest_fire`` for crons in zones, ``every`` and ``at``, and a bare
``croniter(expr, t).get_next()`` / ``get_prev()`` in the same run on the same instants, then prints a
table and the croniter/ours ratios. Each figure is the median over rounds of (batch time / batch size),
over instants spread across 2025-2027 (so DST days and cold year tables are included).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from alma_schedule.core import At, Cron, Every, latest_fire, next_fire

CRONS = [("30 2 * * *", "America/New_York"), ("*/15 * * * *", "Europe/London"), ("0 9 * * mon-fri", "Asia/Kolkata")]
REGISTERED = datetime(2024, 1, 1, tzinfo=UTC)


def median_us(fn: Callable[[datetime], object], instants: list[datetime], rounds: int) -> float:
    per_call = []
    for _ in range(rounds):
        start = time.perf_counter()
        for t in instants:
            fn(t)
        per_call.append((time.perf_counter() - start) / len(instants) * 1e6)
    return statistics.median(per_call)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batch", type=int, default=300)
    args = parser.parse_args()
    rng = random.Random(20260)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    instants = [base + timedelta(seconds=rng.randrange(3 * 365 * 86400)) for _ in range(args.batch)]

    rows: list[tuple[str, float, float | None]] = []
    for expr, tz in CRONS:
        cron, zone = Cron(expr, tz), ZoneInfo(tz)
        for label, ours, ref in (
            ("next", lambda t, c=cron: next_fire(c, REGISTERED, t),
             lambda t, e=expr, z=zone: croniter(e, t.astimezone(z)).get_next(datetime)),
            ("latest", lambda t, c=cron: latest_fire(c, REGISTERED, t),
             lambda t, e=expr, z=zone: croniter(e, t.astimezone(z)).get_prev(datetime)),
        ):
            median_us(ours, instants, 1)  # warm caches (parsed spec, zone year tables)
            rows.append((f"cron {label:6} {expr!r} {tz}", median_us(ours, instants, args.rounds),
                         median_us(ref, instants, max(3, args.rounds // 3))))
    every = Every(timedelta(minutes=15))
    at = At(datetime(2026, 6, 1, tzinfo=UTC))
    for name, sched in (("every 15m", every), ("at", at)):
        rows.append((f"{name} next", median_us(lambda t, s=sched: next_fire(s, REGISTERED, t), instants, args.rounds),
                     None))
        rows.append((f"{name} latest",
                     median_us(lambda t, s=sched: latest_fire(s, REGISTERED, t), instants, args.rounds), None))

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
