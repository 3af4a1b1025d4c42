"""The auth flood (issue 45, item 2): ``/healthz``'s latency and serve-http's memory while wrong
dashboard logins arrive, 200 of them 50 at once.

A real ``alma-schedule serve-http`` (a process of its own, over a migrated SQLite store with a fresh
heartbeat, the dashboard on with a hash at the least cost it accepts, n=2^14 r=8, and 127.0.0.1 a
trusted proxy) and two floods from this process, each of 200 GETs with wrong Basic credentials over
50 threads (a connection each):

* ``one client``: every request from one address: the throttle refuses it after 10 failures;
* ``200 clients``: each request from its own forwarded address: no throttle helps, every request
  runs scrypt, bounded to 2 at once by the scrypt gate.

Meanwhile one thread asks ``GET /healthz`` every 20 ms (a connection each, timed from connect to
the last byte) and another samples the server's resident memory (``/proc/<pid>/status``) every 20
ms. Targets: ``/healthz`` p95 under 100 ms, memory within 50 MB of its start.

    .venv/bin/python bench/bench_auth_flood.py          # scripts/bench --auth-flood
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from procs import spawn, stop

FLOOD, AT_ONCE = 200, 50
P95_TARGET_MS, MEMORY_TARGET_MB = 100.0, 50.0
SCENARIOS = ("one client", "200 clients")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, float]:
    began = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        answer.read()
        return answer.status, (time.perf_counter() - began) * 1000
    finally:
        conn.close()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def served(work: Path) -> Iterator[tuple[int, int]]:
    """``alma-schedule serve-http`` on a free port: ``(port, pid)``."""
    from alma_schedule.dashboard.auth import hash_password
    from alma_schedule.stores import migrate_store, open_store

    url = f"sqlite:///{work}/alma.sqlite3"
    migrate_store(url)
    store = open_store(url)
    store.heartbeat(datetime.now(UTC))
    store.close()
    port = _free_port()
    env = {
        **os.environ,
        "ALMA_DATABASE_URL": url,
        "ALMA_HTTP_SECRET": "bench-tick-secret-0123456789",
        "ALMA_HTTP_PORT": str(port),
        "ALMA_HEARTBEAT_MAX_AGE": "1d",
        "ALMA_DASHBOARD_USER": "ops",
        "ALMA_DASHBOARD_PASSWORD_HASH": hash_password("the right one"),
        "ALMA_DASHBOARD_SCOPES": "*",
        "ALMA_TRUSTED_PROXIES": "127.0.0.1",
        "ALMA_LOG_LEVEL": "WARNING",
    }
    proc = spawn([str(Path(sys.executable).with_name("alma-schedule")), "serve-http"], env, work / "serve-http.log")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if _get(port, "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"serve-http did not start: {(work / 'serve-http.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield port, proc.pid
    finally:
        stop(proc)


def flood(port: int, pid: int, scenario: str) -> dict[str, Any]:
    """One flood of ``scenario``, with /healthz and memory sampled throughout."""
    for _ in range(20):  # warm: the server's first answers
        _get(port, "/healthz")
    start_mb = _rss_mb(pid)
    done = threading.Event()
    health: list[tuple[int, float]] = []
    memory: list[float] = []

    def probe() -> None:
        while not done.is_set():
            health.append(_get(port, "/healthz"))
            time.sleep(0.02)

    def sample() -> None:
        while not done.is_set():
            memory.append(_rss_mb(pid))
            time.sleep(0.02)

    def wrong(i: int) -> int:
        token = base64.b64encode(f"ops:wrong-{i}".encode()).decode()
        who = "203.0.113.7" if scenario == "one client" else f"10.{i // 250}.{i % 250}.9"
        return _get(port, "/dashboard/", {"Authorization": f"Basic {token}", "X-Forwarded-For": who})[0]

    watchers = [threading.Thread(target=probe), threading.Thread(target=sample)]
    for t in watchers:
        t.start()
    began = time.perf_counter()
    with ThreadPoolExecutor(AT_ONCE) as pool:
        statuses = Counter(pool.map(wrong, range(FLOOD)))
    seconds = time.perf_counter() - began
    done.set()
    for t in watchers:
        t.join()
    latencies = sorted(ms for _, ms in health)
    p95 = latencies[max(0, int(len(latencies) * 0.95 + 0.5) - 1)] if latencies else float("nan")
    peak = max(memory, default=start_mb)
    return {
        "scenario": scenario,
        "requests": FLOOD,
        "at_once": AT_ONCE,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "seconds": round(seconds, 2),
        "healthz": {
            "n": len(latencies),
            "not_200": sum(1 for status, _ in health if status != 200),
            "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
            "p95_ms": round(p95, 1),
            "max_ms": round(latencies[-1], 1) if latencies else None,
        },
        "memory_mb": {"start": round(start_mb, 1), "peak": round(peak, 1), "growth": round(peak - start_mb, 1)},
        "p95_target_met": p95 < P95_TARGET_MS,
        "memory_target_met": peak - start_mb < MEMORY_TARGET_MB,
    }


def section() -> dict[str, Any]:
    """Both floods against one server (scripts/bench --auth-flood, and the full run)."""
    with tempfile.TemporaryDirectory() as tmp, served(Path(tmp)) as (port, pid):
        return {"floods": [flood(port, pid, s) for s in SCENARIOS]}


def markdown(result: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Auth flood (issue 45): /healthz and memory while wrong logins arrive",
        "",
        f"{FLOOD} GETs of /dashboard/ with wrong Basic credentials, {AT_ONCE} at once, against a real "
        "serve-http (scrypt n=2^14 r=8); /healthz asked every 20 ms meanwhile. Targets: /healthz p95 under "
        f"{P95_TARGET_MS:.0f} ms, memory within {MEMORY_TARGET_MB:.0f} MB of its start.",
        "",
        "| flood | answers | seconds | /healthz n (not 200) | p50 / p95 / max ms | memory start -> peak MB | targets |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for f in result["floods"]:
        h, m = f["healthz"], f["memory_mb"]
        answers = ", ".join(f"{n} x {status}" for status, n in f["statuses"].items())
        met = (
            ("p95 met" if f["p95_target_met"] else "p95 NOT met")
            + ", "
            + ("memory met" if f["memory_target_met"] else "memory NOT met")
        )
        lines.append(
            f"| {f['scenario']} | {answers} | {f['seconds']} | {h['n']} ({h['not_200']}) | "
            f"{h['p50_ms']} / {h['p95_ms']} / {h['max_ms']} | {m['start']} -> {m['peak']} (+{m['growth']}) | {met} |"
        )
    return lines


if __name__ == "__main__":
    found = section()
    print(json.dumps(found, indent=1))
    print("\n".join(markdown(found)))
