"""Benchmark of the PostgreSQL store, each figure side by side with a baseline measured in the SAME run.

1. ``claim_due`` of 1,000 due routines among 10k / 100k / 1M, against the bare statements it issues
   (the same SELECT ... FOR UPDATE SKIP LOCKED, cursor UPDATE, duplicate SELECT, supersession UPDATE
   and INSERT, hand-written with psycopg, same decide). Target: within 1.5x, flat in N.
2. ``start`` per second from 4 processes against a bare single-row UPDATE from 4 processes (and the
   same UPDATE with ``synchronous_commit = off``, to show where the limit is: the commit's WAL flush).
3. Peak Python memory (tracemalloc) of every system operation at the largest N: they stream.

Usage: ``python bench/bench_store.py [--sizes 10000,100000,1000000] [--repeat 7] [--seconds 5]``.
PostgreSQL: ``ALMA_BENCH_PG_ADMIN`` (default postgres@127.0.0.1:5432). Durability stays on.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.array import ListBinaryDumper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from store_load import (
    ROUTINE_COLS,
    RUN_COLS,
    copy,
    execute,
    history,
    org,
    rid,
    routine_rows,
    run_row,
    scratch_database,
)

from alma_schedule.model import Fire, Routine
from alma_schedule.settings import Settings, Timers
from alma_schedule.stores.sql import SqlStore

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DUE = 1000
TIMERS = Timers.from_settings(Settings())
STEP, WINDOW = timedelta(minutes=1), timedelta(hours=1)


def fire_id(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def decide(routine: Routine) -> Fire:
    due = routine.next_due_at
    assert due is not None
    return Fire(fire_id(due), due, due + WINDOW, due + STEP)


# ------------------------------------------------------------------------------ the bare statements

SELECT_DUE = f"""SELECT {", ".join(ROUTINE_COLS)} FROM routines
WHERE next_due_at <= %(now)s AND (defer_until IS NULL OR defer_until <= %(now)s)
  AND deleted_at IS NULL AND enabled IS true AND paused_reason IS NULL
ORDER BY next_due_at, org, uid, routine_id LIMIT %(limit)s FOR UPDATE SKIP LOCKED"""
KEYS = "unnest(%(org)s::text[], %(uid)s::text[], %(rid)s::text[]"
ADVANCE = f"""UPDATE routines SET last_fire = a.fire, next_due_at = a.next_due_at, defer_until = NULL,
  last_error = NULL, error_count = 0, updated_at = %(now)s
FROM {KEYS}, %(fire)s::timestamptz[], %(next)s::timestamptz[]) AS a(org, uid, routine_id, fire, next_due_at)
WHERE routines.org = a.org AND routines.uid = a.uid AND routines.routine_id = a.routine_id
  AND (routines.last_fire IS NULL OR routines.last_fire < a.fire)"""
EXISTING = f"""SELECT runs.org, runs.uid, runs.routine_id, runs.run_id FROM runs
JOIN {KEYS}, %(run)s::text[]) AS e(org, uid, routine_id, run_id)
  ON runs.org = e.org AND runs.uid = e.uid AND runs.routine_id = e.routine_id AND runs.run_id = e.run_id"""
SUPERSEDE = f"""UPDATE runs SET state = 'skipped', reason = 'missed', state_at = %(now)s, finished_at = %(now)s
FROM {KEYS}) AS s(org, uid, routine_id)
WHERE runs.org = s.org AND runs.uid = s.uid AND runs.routine_id = s.routine_id
  AND runs.state = 'claimed' AND runs.origin = 'schedule' RETURNING runs.*"""
INSERT = f"""INSERT INTO runs (org, uid, routine_id, run_id, state, reason, origin, config_revision, fire_at,
  claimed_at, state_at, expires_at, started_at, submitted_at, finished_at, resend_at, send_attempts,
  next_poll_at, poll_attempts, deadline, target_task_id, error_class, reserved_micros, reserve_day,
  reserve_ceilings, cost_micros, caps_crossed, session_id, turn_id, batch_id, delivery_hash, result_text, erase_at)
SELECT i.org, i.uid, i.routine_id, i.run_id, 'claimed', NULL, 'schedule', i.rev, i.fire, %(now)s, %(now)s,
  i.expires, NULL, NULL, NULL, i.resend, 0, NULL, 0, NULL, NULL, NULL, 0, NULL, '[]', 0, '[]',
  NULL, NULL, NULL, NULL, NULL, NULL
FROM {KEYS}, %(run)s::text[], %(rev)s::text[], %(fire)s::timestamptz[], %(expires)s::timestamptz[],
  %(resend)s::timestamptz[]) AS i(org, uid, routine_id, run_id, rev, fire, expires, resend)
ON CONFLICT DO NOTHING RETURNING org, uid, routine_id, run_id"""


def bare_claim(conn: psycopg.Connection[Any], now: datetime, limit: int) -> int:
    """What claim_due sends, hand-written: one transaction, the same five statements."""
    with conn.transaction():
        rows = conn.execute(SELECT_DUE, {"now": now, "limit": limit}).fetchall()
        k: dict[str, list[Any]] = {n: [] for n in ("org", "uid", "rid", "fire", "next", "run", "rev", "expires")}
        for r in rows:
            due = r[12]
            row = (r[0], r[1], r[2], due, due + STEP, fire_id(due), r[7], due + WINDOW)
            for name, value in zip(k, row, strict=True):
                k[name].append(value)
        p: dict[str, Any] = {"now": now, **k, "resend": [now + TIMERS.resend_first] * len(rows)}
        conn.execute(ADVANCE, p)
        conn.execute(EXISTING, p).fetchall()
        conn.execute(SUPERSEDE, p).fetchall()
        return len(conn.execute(INSERT, p).fetchall())


def reset(conninfo: str, due: int) -> None:
    """Undo one claim (outside the timings): the due routines due again, their runs gone."""
    ids = range(due)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DELETE FROM runs WHERE state = 'claimed'")
        conn.execute(
            "UPDATE routines SET next_due_at = last_fire, last_fire = NULL FROM unnest(%s::text[], %s::text[]) "
            "AS k(org, rid) WHERE routines.org = k.org AND routines.uid = 'user-1' AND routines.routine_id = k.rid",
            ([org(i) for i in ids], [rid(i) for i in ids]),
        )
        conn.execute("VACUUM routines, runs")


def bench_claim(n: int, repeat: int) -> dict[str, float]:
    with scratch_database() as (url, conninfo):
        t = time.perf_counter()
        copy(conninfo, "routines", ROUTINE_COLS, routine_rows(n, DUE, NOW))
        copy(conninfo, "runs", RUN_COLS, history(n, NOW))
        execute(conninfo, "VACUUM ANALYZE")
        load = time.perf_counter() - t
        store = SqlStore(url)
        bare = psycopg.connect(conninfo)
        bare.adapters.register_dumper(list, ListBinaryDumper)  # as the store's connections do
        timings: dict[str, list[float]] = {"store": [], "bare": []}
        try:
            for i in range(repeat + 1):  # the first round warms caches and is not counted
                for name in ("store", "bare") if i % 2 else ("bare", "store"):
                    t = time.perf_counter()
                    got = (
                        len(store.claim_due(NOW, DUE, decide, TIMERS).claimed)
                        if name == "store"
                        else bare_claim(bare, NOW, DUE)
                    )
                    elapsed = time.perf_counter() - t
                    assert got == DUE, (name, got)
                    if i:
                        timings[name].append(elapsed)
                    reset(conninfo, DUE)
            if n == max(SIZES) and not SKIP_MEMORY:
                MEMORY.update(memory_profile(store, conninfo, n))
        finally:
            bare.close()
            store.close()
    s, b = statistics.median(timings["store"]), statistics.median(timings["bare"])
    return {"n": n, "load_s": load, "store_ms": 1000 * s, "bare_ms": 1000 * b, "ratio": s / b}


# ------------------------------------------------------------------------------ start per second

START_UPDATE = (
    "UPDATE runs SET state = 'running', started_at = %s, state_at = %s "
    "WHERE org = %s AND uid = %s AND routine_id = %s AND run_id = %s AND state = 'claimed'"
)


def _starter(kind: str, url: str, conninfo: str, ids: list[int], seconds: float, barrier: Any, out: Any) -> None:
    from alma_schedule.model import RunKey

    run_id = fire_id(NOW - timedelta(minutes=5))
    done = 0
    if kind == "store":
        store = SqlStore(url)
        store.last_tick()  # connect and check the schema before the clock starts
        barrier.wait(60)
        t = time.perf_counter()
        for i in ids:
            if time.perf_counter() - t > seconds:
                break
            done += store.start(RunKey(org(i), "user-1", rid(i), run_id), now=NOW).won
        out.put((done, time.perf_counter() - t))
        store.close()
        return
    with psycopg.connect(conninfo, autocommit=True) as conn:
        if kind == "bare_async_commit":
            conn.execute("SET synchronous_commit = off")  # for comparison only: never done by the store
        barrier.wait(60)
        t = time.perf_counter()
        for i in ids:
            if time.perf_counter() - t > seconds:
                break
            done += conn.execute(START_UPDATE, (NOW, NOW, org(i), "user-1", rid(i), run_id)).rowcount
        out.put((done, time.perf_counter() - t))


def bench_start(seconds: float, per_kind: int = 40_000, procs: int = 4) -> dict[str, float]:
    kinds = ("store", "bare", "bare_async_commit")
    with scratch_database() as (url, conninfo):
        n = per_kind * len(kinds)
        copy(conninfo, "routines", ROUTINE_COLS, routine_rows(n, 0, NOW))
        copy(conninfo, "runs", RUN_COLS, (run_row(i, "claimed", NOW, resend_at=NOW) for i in range(n)))
        execute(conninfo, "VACUUM ANALYZE")
        ctx = multiprocessing.get_context("spawn")
        rates: dict[str, float] = {}
        for k, kind in enumerate(kinds):
            ids = list(range(k * per_kind, (k + 1) * per_kind))
            barrier, out = ctx.Barrier(procs), ctx.Queue()
            workers = [
                ctx.Process(target=_starter, args=(kind, url, conninfo, ids[p::procs], seconds, barrier, out))
                for p in range(procs)
            ]
            for w in workers:
                w.start()
            results = [out.get(timeout=seconds + 120) for _ in workers]
            for w in workers:
                w.join(60)
            rates[kind] = sum(done for done, _ in results) / max(elapsed for _, elapsed in results)
    return rates


# ------------------------------------------------------------------------------ memory


def memory_profile(store: SqlStore, conninfo: str, n: int) -> dict[str, float]:
    """Peak Python memory (KiB) of each system operation on the loaded database of ``n`` routines."""
    ids = range(DUE, 2 * DUE)
    with psycopg.connect(conninfo, autocommit=True) as conn:  # some of every kind of row
        conn.execute("UPDATE runs SET result_text = 'x', erase_at = %s WHERE routine_id < %s", (NOW, rid(5000)))
        conn.execute("UPDATE routines SET paused_reason = 'bench', next_due_at = NULL WHERE routine_id < %s",
                     (rid(200),))  # fmt: skip
        conn.execute("UPDATE routines SET deleted_at = %s, next_due_at = NULL WHERE routine_id BETWEEN %s AND %s",
                     (NOW, rid(3000), rid(3499)))  # fmt: skip
    copy(conninfo, "runs", RUN_COLS, (run_row(i, "submitted", NOW, next_poll_at=NOW, deadline=NOW) for i in ids))
    ops: dict[str, Callable[[], Any]] = {
        "claim_due(1000)": lambda: store.claim_due(NOW + STEP, DUE, decide, TIMERS),
        "take_resends": lambda: store.take_resends(NOW + timedelta(minutes=3), DUE, TIMERS),
        "take_polls": lambda: store.take_polls(NOW, DUE, TIMERS),
        "peek_due": lambda: store.peek_due(NOW + STEP, DUE),
        "peek_resends": lambda: store.peek_resends(NOW, DUE),
        "peek_polls": lambda: store.peek_polls(NOW, DUE),
        "list_inactive": lambda: store.list_inactive(),
        "blocked": lambda: store.blocked(NOW + timedelta(hours=2), timedelta(minutes=5)),
        "stuck": lambda: store.stuck(NOW + timedelta(hours=2), timedelta(hours=1)),
        "iter_routines (all)": lambda: sum(1 for _ in store.iter_routines()),
        "reindex (all)": lambda: store.reindex(lambda r: r.next_due_at),
        "erase_expired_results": lambda: store.erase_expired_results(NOW, DUE),
        "prune": lambda: store.prune(NOW - timedelta(minutes=30)),
        "purge_deleted": lambda: store.purge_deleted(),
        "heartbeat": lambda: store.heartbeat(NOW),
        "last_tick": lambda: store.last_tick(),
    }
    out: dict[str, float] = {}
    tracemalloc.start()
    try:
        for name, op in ops.items():
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            t = time.perf_counter()
            result = op()
            out[name] = (tracemalloc.get_traced_memory()[1] - base) / 1024
            out[name + " s"] = time.perf_counter() - t
            out[name + " n"] = _count(result)
    finally:
        tracemalloc.stop()
    return out


def _count(result: Any) -> float:
    """How much an operation returned or touched (rows), for the report."""
    if isinstance(result, bool) or result is None:
        return 0
    if isinstance(result, int):
        return result
    if isinstance(result, list):
        return len(result)
    parts = [getattr(result, f, ()) for f in ("claimed", "skipped", "resend", "expired")]
    return sum(len(p) for p in parts)


# ------------------------------------------------------------------------------ main

SIZES: list[int] = []
MEMORY: dict[str, float] = {}
SKIP_MEMORY = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="routine counts, comma separated")
    parser.add_argument("--repeat", type=int, default=7, help="timed claim_due rounds per size")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each start phase")
    parser.add_argument("--skip-start", action="store_true", help="skip the start/s comparison")
    parser.add_argument("--skip-memory", action="store_true", help="skip the peak-memory table")
    args = parser.parse_args()
    SIZES.extend(int(s) for s in args.sizes.split(","))
    global SKIP_MEMORY
    SKIP_MEMORY = args.skip_memory
    print(f"claim_due of {DUE} due routines: store vs the same statements hand-written (median of {args.repeat})")
    print(f"{'routines':>10} {'load s':>8} {'store ms':>9} {'bare ms':>8} {'ratio':>6}")
    rows = []
    for n in SIZES:
        r = bench_claim(n, args.repeat)
        rows.append(r)
        print(f"{n:>10,} {r['load_s']:>8.1f} {r['store_ms']:>9.1f} {r['bare_ms']:>8.1f} {r['ratio']:>6.2f}", flush=True)
    store_ms = [r["store_ms"] for r in rows]
    print(f"flatness: store {max(store_ms) / min(store_ms):.2f}x from {min(SIZES):,} to {max(SIZES):,} routines")
    if MEMORY:
        print(f"\npeak Python memory per system operation at {max(SIZES):,} routines (tracemalloc)")
        print(f"  {'operation':<24} {'peak':>13} {'rows':>9} {'time (traced)':>14}")
    for name, kib in MEMORY.items():
        if not name.endswith((" s", " n")):
            print(f"  {name:<24} {kib:>9.0f} KiB {MEMORY[name + ' n']:>9.0f} {MEMORY[name + ' s']:>12.2f} s")
    if not args.skip_start:
        rates = bench_start(args.seconds)
        print(f"\nstart per second, 4 processes, {args.seconds:g} s each (synchronous_commit on unless noted)")
        print(f"  store.start (CAS joined to the routine)  {rates['store']:>8.0f}/s")
        ratio = rates["bare"] / rates["store"]
        print(f"  bare single-row UPDATE (autocommit)      {rates['bare']:>8.0f}/s   ratio {ratio:.2f}")
        print(f"  bare UPDATE, synchronous_commit=off      {rates['bare_async_commit']:>8.0f}/s   (the fsync bound)")


if __name__ == "__main__":
    main()
