"""Growth in N at fixed due counts: alma-schedule, RedBeat and the floor at due = 0, 100, 1,000.

The same systems, workload and protocol as the main table (``compare_systems``: the same instant,
every message really published and counted; interleaved repetitions, medians with min and max,
ratios pair by pair). For each N the systems are set up once, with the largest due count; a smaller
due count d keeps the first d of those due (by key) and parks the others (their next fire moved an
hour on, untimed, in the reset), and the superseded / overlapping tenths are taken among those d.
A cell whose routines and due count the main table already measured is taken from it (marked
``"from": "main table"``), not measured twice. ``growth`` is, for each due count, the median tick at
the largest N over the one at the smallest N (1.0: flat in N).
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

import bench_tick as bt
import compare_systems as systems
import psycopg
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


class _Alma(systems.Alma):
    def set_due(self, d: int) -> None:
        if not hasattr(self, "all_due"):
            with psycopg.connect(self.dsn) as conn:
                sql = "SELECT routine_id FROM routines WHERE kind = 'bench-due' ORDER BY routine_id"
                self.all_due = [r[0] for r in conn.execute(sql)]
        self.d, tenth = d, d // 10
        self.pending, self.active = self.all_due[:tenth], self.all_due[tenth : 2 * tenth]

    def reset(self) -> None:
        super().reset()
        with psycopg.connect(self.dsn) as conn:
            conn.execute(
                "UPDATE routines SET next_due_at = %s WHERE routine_id = ANY(%s)",
                (bt.T + timedelta(hours=1), self.all_due[self.d :]),
            )


class _RedBeat(systems.RedBeat):
    def set_due(self, d: int) -> None:
        self.all_due = getattr(self, "all_due", self.due_names)
        self.due, self.due_names = d, self.all_due[:d]


class _Floor(systems.Floor):
    def set_due(self, d: int) -> None:
        self.due = d

    def reset(self) -> None:
        super().reset()
        with self.conn.transaction():
            self.conn.execute(
                "UPDATE routines SET next_due_at = %s WHERE next_due_at = %s AND id NOT IN"
                " (SELECT id FROM routines WHERE next_due_at = %s ORDER BY id LIMIT %s)",
                (bt.T + timedelta(hours=1), bt.T, bt.T, self.due),
            )


def measure(n: int, dues: list[int], reps: int, redis_url: str, pg_admin: str) -> list[dict[str, Any]]:
    """One set-up per N (with the largest due count), then each due count in turn."""
    r = redis.Redis.from_url(redis_url)
    top = max(dues)
    contenders: dict[str, Any] = {
        "alma": _Alma(n, top, redis_url, pg_admin),
        "redbeat": _RedBeat(n, top, redis_url),
        "floor": _Floor(n, top, redis_url, pg_admin),
    }
    cells = []
    try:
        for system in contenders.values():
            system.setup()
            system.set_due(top)
            system.warm()
            systems.drain(r)
        for due in dues:
            times: dict[str, list[float]] = {k: [] for k in contenders}
            started = time.perf_counter()
            for _ in range(reps):
                for name, system in contenders.items():
                    system.set_due(due)
                    system.reset()
                    systems.drain(r)
                    t0 = time.perf_counter()
                    sent = system.tick()
                    times[name].append(time.perf_counter() - t0)
                    published = systems.published(r)
                    if published != sent:
                        raise SystemExit(f"growth: {name} at {n}, {due} due: published {published}, expected {sent}")
            cell: dict[str, Any] = {"routines": n, "due": due, "reps": reps}
            cell["wall_s"] = round(time.perf_counter() - started, 1)
            cell.update({name: _stats(xs) for name, xs in times.items()})
            cell["ours_over_floor"] = _ratio(times["alma"], times["floor"])
            cell["redbeat_over_ours"] = _ratio(times["redbeat"], times["alma"])
            cells.append(cell)
    finally:
        for system in contenders.values():
            system.teardown()
        r.flushdb()
    return cells


def run(
    sizes: list[int], dues: list[int], reps: int, redis_url: str, pg_admin: str, main_cells: list[dict[str, Any]]
) -> dict[str, Any]:
    """Every (N, due) with due <= N; the main table's cells reused where they match."""
    known = {(c["routines"], c["due"]): c for c in main_cells}
    cells = []
    for n in sizes:
        todo = [d for d in dues if d <= n and (n, d) not in known]
        measured = {c["due"]: c for c in (measure(n, todo, reps, redis_url, pg_admin) if todo else [])}
        for due in (d for d in dues if d <= n):
            if due in measured:
                cell = measured[due]
            else:
                c = known[(n, due)]
                cell = {k: c[k] for k in ("routines", "due", "reps", *NAMES, "ours_over_floor", "redbeat_over_ours")}
                cell["from"] = "main table"
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
    if g["growth"]:
        lines.append("")
    for due, row in g["growth"].items():
        lo, hi = row["from_to"]  # type: ignore[misc]
        parts = ", ".join(f"{name} {row[name]}" for name in NAMES if name in row)
        lines.append(f"- median tick at {hi:,} over {lo:,} routines, {int(due):,} due: {parts}")
    return lines
