"""Issue 45, item 10 (the worker's side): the worker exporter, which has no authentication, listens on
127.0.0.1 unless ALMA_METRICS_BIND says otherwise. Real exporters in a child process (they start
threads and set the process's environment), their listening sockets read from /proc/<pid>/net/tcp."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # a subprocess

CHILD = """
import sys
from celery import Celery
from alma_schedule.settings import Settings
from alma_schedule.tasks.bootstep import start_worker_metrics
from alma_schedule.tasks.composition import Composition
from alma_schedule.tasks.metrics import start_exporter

plain, default, everywhere = (int(p) for p in sys.argv[1:4])
start_exporter(plain)
start_worker_metrics(Composition(Celery(), Settings(metrics_port=default)), {"alma.run"})
start_worker_metrics(Composition(Celery(), Settings(metrics_port=everywhere, metrics_bind="0.0.0.0")), {"alma.run"})
print("listening", flush=True)
sys.stdin.read()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(pid: int) -> dict[int, str]:
    """Port -> local IPv4 address of each listening TCP socket the child's namespace shows."""
    out: dict[int, str] = {}
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A":  # LISTEN
            address, port = local.split(":")
            out[int(port, 16)] = socket.inet_ntoa(bytes.fromhex(address)[::-1])
    return out


def test_the_worker_exporter_binds_loopback_unless_metrics_bind_says_otherwise(tmp_path: Path) -> None:
    ports = [_free_port() for _ in range(3)]
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"), "PATH": "/usr/bin:/bin"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *map(str, ports)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "listening"
        deadline = time.monotonic() + 30
        while not set(ports) <= set(_listening(child.pid)):
            assert time.monotonic() < deadline, "the exporters never listened"
            time.sleep(0.05)
        seen = _listening(child.pid)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)
    assert seen[ports[0]] == "127.0.0.1"  # start_exporter's default
    assert seen[ports[1]] == "127.0.0.1"  # ALMA_METRICS_BIND's default
    assert seen[ports[2]] == "0.0.0.0"  # said otherwise
