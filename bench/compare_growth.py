"""Growth in N at fixed due counts: alma-schedule, RedBeat and the floor at due = 0, 100, 1,000.

The same systems, workload and protocol as the main table (``compare_systems``: the same instant,
every message really published and counted; interleaved repetitions, medians with min and max,
ratios pair by pair). A cell whose routines and due count the main table already measured is taken
from it (marked ``"from": "main table"``), not measured twice. ``growth`` is, for each due count, the
median tick at the largest N over the one at the smallest N (1.0: flat in N).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import compare_systems as systems
import redis

SIZES, DUES = [1_000, 10_000, 100_000], [0, 100, 1_000]
QUICK_SIZES, QUICK_DUES = [1_000, 10_000], [0, 10, 100]
NAMES = ("alma", "redbeat", "floor")


def _stats(xs: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(xs) * 1e3, 2),
        "min": round(min(xs) * 1e3, 2),
        "max": round(max(xs) * 1e3, 2),
    }


def _ratio(a: list[float], b: list[float]) -> float:
    return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 2)


def measure(n: int, due: int, reps: int, redis_url: str, pg_admin: str) -> dict[str, Any]:
    r = redis.Redis.from_url(redis_url)
    contenders: dict[str, systems.System] = {
        "alma": systems.Alma(n, due, redis_url, pg_admin),
        "redbeat": systems.RedBeat(n, due, redis_url),
        "floor": systems.Floor(n, due, redis_url, pg_admin),
    }
    times: dict[str, list[float]] = {k: [] for k in contenders}
    started = time.perf_counter()
    try:
        for system in contenders.values():
            system.setup()
            system.warm()
            systems.drain(r)
        for _ in range(reps):
            for name, system in contenders.items():
                system.reset()
                systems.drain(r)
                t0 = time.perf_counter()
                sent = system.tick()
                times[name].append(time.perf_counter() - t0)
                published = systems.published(r)
                if published != sent:
                    raise SystemExit(f"growth: {name} at {n}, {due} due: published {published}, expected {sent}")
    finally:
        for system in contenders.values():
            system.teardown()
        r.flushdb()
    cell: dict[str, Any] = {"routines": n, "due": due, "reps": reps, "wall_s": round(time.perf_counter() - started, 1)}
    cell.update({name: _stats(xs) for name, xs in times.items()})
    cell["ours_over_floor"] = _ratio(times["alma"], times["floor"])
    cell["redbeat_over_ours"] = _ratio(times["redbeat"], times["alma"])
    return cell


def run(
    sizes: list[int], dues: list[int], reps: int, redis_url: str, pg_admin: str, main_cells: list[dict[str, Any]]
) -> dict[str, Any]:
    """Every (N, due) with due <= N; the main table's cells reused where they match."""
    known = {(c["routines"], c["due"]): c for c in main_cells}
    cells = []
    for n in sizes:
        for due in dues:
            if due > n:
                continue
            if (n, due) in known:
                c = known[(n, due)]
                cell = {k: c[k] for k in ("routines", "due", "reps", *NAMES, "ours_over_floor", "redbeat_over_ours")}
                cell["from"] = "main table"
            else:
                cell = measure(n, due, reps, redis_url, pg_admin)
            print({"growth": cell}, flush=True)
            cells.append(cell)
    growth: dict[str, dict[str, float]] = {}
    for due in dues:
        row = [c for c in cells if c["due"] == due]
        if len(row) >= 2:
            lo, hi = min(row, key=lambda c: c["routines"]), max(row, key=lambda c: c["routines"])
            growth[str(due)] = {
                name: round(hi[name]["median"] / lo[name]["median"], 2) for name in NAMES if lo[name]["median"] > 0
            }
            growth[str(due)]["from_to"] = [lo["routines"], hi["routines"]]  # type: ignore[assignment]
    return {"sizes": sizes, "dues": dues, "reps": reps, "cells": cells, "growth": growth}


def markdown(g: dict[str, Any]) -> list[str]:
    def fmt(c: dict[str, float]) -> str:
        return f"{c['median']:,.1f} ({c['min']:,.1f}-{c['max']:,.1f})"

    lines = [
        "",
        "## Growth in N at fixed due counts",
        "",
        "The same workload and protocol as above, ms; a cell marked * is the main table's.",
        "",
        "| routines | due | reps | alma-schedule | RedBeat | floor | ours / floor | RedBeat / ours |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {c['routines']:,} | {c['due']:,}{' *' if c.get('from') else ''} | {c['reps']} | {fmt(c['alma'])} | "
        f"{fmt(c['redbeat'])} | {fmt(c['floor'])} | {c['ours_over_floor']} | {c['redbeat_over_ours']} |"
        for c in g["cells"]
    ]
    for due, row in g["growth"].items():
        lo, hi = row["from_to"]  # type: ignore[misc]
        parts = ", ".join(f"{name} {row[name]}" for name in NAMES if name in row)
        lines.append(f"\nMedian tick at {hi:,} over {lo:,} routines, {int(due):,} due: {parts}.")
    return lines
