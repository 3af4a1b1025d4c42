"""The dashboard at scale (issue 17): N routines and N ledger rows on PostgreSQL (COPY, then ANALYZE),
each page rendered through the real ASGI app, and every statement a page issues run again under
``EXPLAIN (ANALYZE, BUFFERS)``: the rows each plan node read per table (rows removed by a filter
included), against the bound of 20 x the page size (50). A benchmark, not a timed test.

    .venv/bin/python bench/bench_dashboard.py --routines 1000000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import psycopg
from sqlalchemy import event
from starlette.testclient import TestClient
from store_load import ROUTINE_COLS, RUN_COLS, copy, execute, history, routine_rows, scratch_database

from alma_schedule.dashboard.auth import hash_password
from alma_schedule.http import create_http_app
from alma_schedule.settings import Secret, Settings
from alma_schedule.stores import open_store

PAGE = 50
BOUND = 20 * PAGE
PAGES = {
    "overview": "/dashboard/?scope=org-7/user-1",
    "routines": "/dashboard/routines?scope=org-7/user-1",
    "routines (state filter)": "/dashboard/routines?scope=org-7/user-1&state=paused",
    "routine": "/dashboard/routine?scope=org-7/user-1&id=routine-0000007",
    "ledger": "/dashboard/ledger?scope=org-7/user-1",
    "ledger (reason filter)": "/dashboard/ledger?scope=org-7/user-1&reason=provider_error",
    "stuck": "/dashboard/stuck",
    # issue 51: the fleet pages of a `*` user (no scope typed), and the routine page's charts
    "overview (fleet, charts)": "/dashboard/",
    "scopes": "/dashboard/scopes",
    "routines (fleet)": "/dashboard/routines",
    "routines (fleet, kind)": "/dashboard/routines?kind=nothing",
    "routines (fleet, prefix)": "/dashboard/routines?prefix=routine-00000",
    "routines (scope, prefix)": "/dashboard/routines?scope=org-7/user-1&prefix=routine-00000",
    "ledger (fleet)": "/dashboard/ledger",
    "ledger (fleet, reason)": "/dashboard/ledger?reason=provider_error",
}


def _rows_per_table(plan: dict[str, Any], out: dict[str, float]) -> None:
    relation = plan.get("Relation Name") or plan.get("Index Name")
    if relation and plan.get("Node Type", "").endswith("Scan"):
        table = plan.get("Relation Name") or relation
        read = (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)) * plan.get("Actual Loops", 1)
        out[table] += read
    for child in plan.get("Plans", ()):
        _rows_per_table(child, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.routines
    now = datetime.now(UTC).replace(microsecond=0)
    with scratch_database() as (url, conninfo):
        t0 = time.monotonic()
        copy(conninfo, "routines", ROUTINE_COLS, routine_rows(n, 0, now))
        copy(conninfo, "runs", RUN_COLS, history(n, now))
        execute(conninfo, "ANALYZE")
        print(f"{n:,} routines and {n:,} runs loaded and analyzed in {time.monotonic() - t0:.0f} s")
        store = open_store(url)
        store.heartbeat(now)
        explained: list[tuple[str, Any]] = []

        @event.listens_for(store.engine, "after_cursor_execute")
        def explain(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            if statement.lstrip().upper().startswith("SELECT") and not many:
                explained.append((statement, parameters))

        settings = Settings(
            database_url=url,
            http_secret=Secret("bench-secret-of-the-clock"),
            dashboard_user="ops",
            dashboard_scopes="*",
            dashboard_password_hash=Secret(hash_password("pw")),  # remembered after the first page
            clock=lambda: now,
        )
        client = TestClient(create_http_app(settings, store=store, send=lambda s, at: "t"))
        client.auth = ("ops", "pw")
        print(
            f"{'page':<26} {'median ms':>10} {'statements':>10}  max rows read per table and statement "
            f"(bound {BOUND:,}) (page: rows read per table by all its statements)"
        )
        raw = store.engine.raw_connection()
        for name, path in PAGES.items():
            times = []
            for _ in range(args.repeat):
                explained.clear()
                began = time.perf_counter()
                assert client.get(path).status_code == 200, path
                times.append((time.perf_counter() - began) * 1000)
            worst: dict[str, float] = defaultdict(float)
            total: dict[str, float] = defaultdict(float)
            cur = raw.cursor()
            for statement, params in explained:
                try:
                    cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params or None)
                except psycopg.Error as exc:  # a statement EXPLAIN cannot take is named, not fatal
                    print(f"  (not explained: {type(exc).__name__}: {statement[:60]!r})")
                    raw.rollback()
                    cur = raw.cursor()
                    continue
                per: dict[str, float] = defaultdict(float)
                _rows_per_table(cur.fetchone()[0][0]["Plan"], per)
                for table, rows in per.items():
                    worst[table] = max(worst[table], rows)
                    total[table] += rows
            raw.rollback()
            shown = ", ".join(f"{t} {int(r):,}" for t, r in sorted(worst.items())) or "-"
            summed = ", ".join(f"{t} {int(r):,}" for t, r in sorted(total.items())) or "-"
            print(
                f"{name:<26} {statistics.median(times):>10.1f} {len(explained):>10}  {shown}  (page: {summed})",
                flush=True,
            )
        raw.close()
        store.close()
    print(json.dumps({"routines": n}))


if __name__ == "__main__":
    main()
