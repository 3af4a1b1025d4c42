"""An idle worker's own broker traffic: a real ``celery worker`` of our ready app on a Redis of its own.

A temporary ``redis-server`` (a free port, no persistence; or ``--redis`` for a server nobody else
uses: the counts are the server's) and a scratch PostgreSQL store of ``--routines`` routines, none
due. The worker (``celery -A alma_schedule.celery worker -Q alma.tick,alma.run,alma.collect -c 1``,
plus ``--worker-args``) is started and left to settle for ``--settle`` seconds; then Redis
``INFO commandstats`` and ``INFO stats`` are read before and after ``--seconds`` seconds of idling
(no message is sent). Reported: commands per second in all and per command, new connections
(``total_connections_received``) and the worker's connections at the end (``CLIENT LIST``, less
the clients connected before it started). The
benchmark's own ``INFO`` / ``CLIENT`` calls are left out of the counts.

    .venv/bin/python bench/worker_idle.py --seconds 60
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import spawn, stop
from store_load import ROUTINE_COLS, copy, routine_rows, scratch_database

OURS = {"info", "client|list", "client", "ping", "hello", "select", "client|setinfo"}  # the bench's own calls
QUEUES = "alma.tick,alma.run,alma.collect"
#: The benchmark's routines are of kind ``test``: a worker refuses to start without a runner for every
#: stored kind, so a no-op runner is made visible through the ordinary entry point group.
RUNNER = """from alma_schedule.model import RunResult


class Runner:
    def validate(self, routine):
        pass

    def run(self, routine, handle):
        return RunResult.completed()


def factory(settings):
    return Runner()
"""


def _runner_path(tmp: Path) -> str:
    dist = tmp / "alma_bench_runner-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: alma-bench-runner\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[alma_schedule.runners]\ntest = alma_bench_runner:factory\n")
    (tmp / "alma_bench_runner.py").write_text(RUNNER)
    return str(tmp)


@contextlib.contextmanager
def own_redis() -> Iterator[str]:
    """A temporary redis-server on a free port, stopped at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    work = tempfile.mkdtemp()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", work],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = redis.Redis(port=port)
        for _ in range(100):
            with contextlib.suppress(redis.ConnectionError):
                if client.ping():
                    break
            time.sleep(0.1)
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


def _stats(client: redis.Redis) -> dict[str, Any]:
    commands = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in client.info("commandstats").items()}
    return {"commands": commands, "connections": int(client.info("stats")["total_connections_received"])}


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    names = set(before) | set(after)
    moved = {n: after.get(n, 0) - before.get(n, 0) for n in names if n not in OURS}
    return {n: c for n, c in sorted(moved.items(), key=lambda kv: -kv[1]) if c}


def _start_worker(env: dict[str, str], extra: list[str], log: Path) -> subprocess.Popen[bytes]:
    celery = str(Path(sys.executable).with_name("celery"))
    argv = [celery, "-A", "alma_schedule.celery", "worker", "-Q", QUEUES, "-c", "1", "--loglevel", "INFO", *extra]
    return spawn(argv, env, log)


def measure(redis_url: str, routines: int, seconds: float, settle: float, extra: list[str]) -> dict[str, Any]:
    client = redis.Redis.from_url(redis_url)
    with scratch_database() as (url, conninfo), tempfile.TemporaryDirectory() as tmp:
        copy(conninfo, "routines", ROUTINE_COLS, routine_rows(routines, 0, datetime.now(UTC)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
        env.update(ALMA_DATABASE_URL=url, ALMA_BROKER_URL=redis_url, ALMA_RESULT_BACKEND=redis_url,
                   PYTHONUNBUFFERED="1", PYTHONPATH=_runner_path(Path(tmp)))  # fmt: skip
        log = Path(tmp) / "worker.log"
        others = {c["id"] for c in client.client_list()}  # this benchmark's own, and any left before
        proc = _start_worker(env, extra, log)
        try:
            deadline = time.monotonic() + 60
            while "ready." not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.2)
            time.sleep(settle)
            before = _stats(client)
            began = time.monotonic()
            time.sleep(seconds)
            after = _stats(client)
            elapsed = time.monotonic() - began
            clients = [c for c in client.client_list() if c["id"] not in others]
        finally:
            stop(proc, wait=20)
    commands = _delta(before["commands"], after["commands"])
    return {
        "worker": f"celery -A alma_schedule.celery worker -Q {QUEUES} -c 1 {' '.join(extra)}".strip(),
        "routines": routines,
        "seconds": round(elapsed, 1),
        "commands_per_second": round(sum(commands.values()) / elapsed, 2),
        "per_command_per_second": {n: round(c / elapsed, 2) for n, c in commands.items()},
        "new_connections": after["connections"] - before["connections"],
        "worker_connections": len(clients),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--redis", default="", help="a Redis nobody else uses (default: a temporary redis-server)")
    ap.add_argument("--routines", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--worker-args", default="", help="more worker arguments, e.g. '-E' or '--without-gossip'")
    args = ap.parse_args(argv)
    extra = args.worker_args.split()
    if args.redis:
        result = measure(args.redis, args.routines, args.seconds, args.settle, extra)
    else:
        with own_redis() as url:
            result = measure(url, args.routines, args.seconds, args.settle, extra)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
