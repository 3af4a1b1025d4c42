"""Helpers of the Celery tests: settings, in-process workers, subprocess workers and clocks."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alma_schedule.model import RunKey, RunResult
from alma_schedule.settings import Settings

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
CELERY = str(VENV_BIN / "celery")
ALMA = str(VENV_BIN / "alma-schedule")


def make_settings(database_url: str, broker_url: str, **changes: Any) -> Settings:
    """Settings for a test: its own store and Redis db (results in the same db)."""
    return Settings(database_url=database_url, broker_url=broker_url, result_backend=broker_url, **changes)


def utcnow() -> datetime:
    return datetime.now(UTC)


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate!r}")
        time.sleep(interval)


def revoke_on_worker(app: Any, task_id: str, timeout: float = 30.0) -> None:
    """Revoke ``task_id`` on the running worker, asking until it replies: a broadcast reaches only a
    worker whose control consumer has subscribed (Redis pub/sub keeps nothing for a late one), which
    may be just after the worker is ready. A revoke is idempotent."""
    wait_for(
        lambda: app.control.revoke(task_id, reply=True, timeout=1, limit=1),
        timeout,
        what="the worker acknowledged the revoke",
    )


class Recorder:
    """A runner that records each key it ran (in-process workers only)."""

    def __init__(self) -> None:
        self.keys: list[RunKey] = []

    def validate(self, routine: Any) -> None:
        return None

    def run(self, routine: Any, handle: Any) -> RunResult:
        self.keys.append(handle.key)
        return RunResult.completed()


def ready_app(settings: Settings, recorder: Any) -> Any:
    """A ready app whose kind ``noop`` runs ``recorder`` (in-process workers only)."""
    from alma_schedule.celery import create_app
    from alma_schedule.runners.registry import KindRegistry

    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"noop": lambda s: recorder})
    return create_app(settings, registry=registry)


@contextlib.contextmanager
def inprocess_worker(app: Any, queues: list[str], **kwargs: Any) -> Iterator[Any]:
    """A real worker consuming ``queues`` in a thread of this process (solo pool), stopped after.

    ``start_worker`` makes the app current and default; both are restored afterwards.
    """
    from celery import _state
    from celery.contrib.testing.worker import start_worker

    previous_default = _state.default_app
    previous_current = _state._tls.current_app
    try:
        with start_worker(
            app,
            pool="solo",
            perform_ping_check=False,
            queues=queues,
            loglevel="WARNING",
            shutdown_timeout=30,
            **kwargs,
        ) as worker:
            yield worker
    finally:
        _state.default_app = previous_default
        _state._tls.current_app = previous_current


def bound_socket() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1 (SO_REUSEADDR, not listening): the caller
    hands it to a server in this process, so no other process can take the port in between."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def reserved_port() -> Iterator[int]:
    """A free port of 127.0.0.1 for a server in ANOTHER process, held until the block ends.

    The port stays bound (SO_REUSEADDR, never listening) by this process meanwhile: the kernel
    hands it to no other ``bind(0)`` nor uses it as an outgoing connection's local port, so a
    concurrent test run cannot take it between our choice and the server's own bind. A server that
    binds with SO_REUSEADDR (uvicorn, Tornado/Flower) can still bind and listen on it (Linux allows
    it while no other socket on the port listens).
    """
    sock = bound_socket()
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


# --------------------------------------------------------------------------- subprocesses


def runner_path(tmp_path: Path) -> str:
    """A PYTHONPATH that makes the test kinds visible through the ``alma_schedule.runners`` entry
    points: a tiny dist-info in ``tmp_path`` plus this directory (where ``e2e_runners`` lives)."""
    dist = tmp_path / "eps" / "alma_e2e_runners-0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: alma-e2e-runners\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "[alma_schedule.runners]\ncount = e2e_runners:count_factory\nhooked = e2e_runners:needs_webhook_factory\n"
    )
    return os.pathsep.join([str(dist.parent), str(HERE)])


def alma_env(settings: Settings, tmp_path: Path, **extra: str) -> dict[str, str]:
    """A subprocess environment: no inherited ALMA_* vars, ours from ``settings``, test kinds on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env.update(
        {
            "ALMA_DATABASE_URL": settings.database_url,
            "ALMA_BROKER_URL": settings.broker_url,
            "ALMA_RESULT_BACKEND": settings.result_backend or settings.broker_url,
            "PYTHONPATH": runner_path(tmp_path),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


class Procs:
    """Subprocesses started by one test, each in its own session (so a SIGKILL reaches its
    children), logs in ``tmp_path``; everything left is stopped at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(
        self, name: str, argv: list[str], env: Mapping[str, str], cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in ``cwd`` (default: the test's tmp_path), its output in ``NAME.log``."""
        log = open(self.tmp_path / f"{name}.log", "wb")
        proc = subprocess.Popen(
            argv,
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd or self.tmp_path,
            start_new_session=True,
        )
        log.close()
        self.procs.append((name, proc))
        return proc

    def worker(
        self, name: str, env: Mapping[str, str], queues: str, concurrency: int = 1, *extra: str
    ) -> subprocess.Popen[bytes]:
        argv = [
            CELERY,
            "-A",
            "alma_schedule.celery",
            "worker",
            "-Q",
            queues,
            "-c",
            str(concurrency),
            "-n",
            f"{name}@%h",
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--without-gossip",
            *extra,
        ]
        return self.start(name, argv, env)

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the process and everything in its session (a worker and its pool children)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> int:
        """SIGTERM (warm shutdown), then SIGKILL after ``timeout``; returns the exit code."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill(proc)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # stray pool children, if any
        return proc.returncode

    def stop_all(self) -> None:
        for _name, proc in reversed(self.procs):
            self.stop(proc)


def wait_worker_ready(procs: Procs, name: str, timeout: float = 30.0) -> None:
    """Wait for the worker's ``ready.`` log line (it consumes from then on)."""
    proc = dict(procs.procs)[name]

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"worker {name} exited {proc.returncode}:\n{procs.log(name)[-3000:]}")
        return "ready." in procs.log(name)

    wait_for(ready, timeout, 0.1, f"worker {name} ready")
