"""The chaos suite's processes: prefork Celery workers (``celery -A chaos_fleet worker``) and the
clocks, each started in its own session with its log in the run's folder; a worker the chaos
killed is started again (a new generation) by :meth:`Procs.revive`, as a supervisor would.

Every session ever started is remembered and SIGKILLed by :meth:`Procs.stop_all` (after a warm
SIGTERM), including the pool children a killed parent left behind. A worker parent found dead that
the chaos did not kill (:meth:`Procs.kill_parent`) is a failure of the run: :attr:`Procs.unexpected`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CELERY = str(Path(sys.executable).parent / "celery")


def entry_points(root: Path) -> str:
    """A PYTHONPATH that makes the ``slow`` kind an ``alma_schedule.runners`` entry point (a tiny
    dist-info in ``root``) and this folder importable (the fleet, the kinds)."""
    dist = root / "eps" / "alma_chaos_kinds-0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: alma-chaos-kinds\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[alma_schedule.runners]\nslow = chaos_kinds:slow_factory\n")
    return os.pathsep.join([str(dist.parent), str(HERE)])


@dataclass
class Worker:
    name: str
    queues: str
    concurrency: int
    proc: subprocess.Popen[bytes] | None = None
    generation: int = 0


@dataclass
class Procs:
    root: Path
    env: dict[str, str]
    workers: dict[str, Worker] = field(default_factory=dict)
    clocks: list[subprocess.Popen[bytes]] = field(default_factory=list)
    sessions: list[subprocess.Popen[bytes]] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)  # worker parents the chaos SIGKILLed
    unexpected: list[str] = field(default_factory=list)  # worker parents that died on their own

    def _start(self, log_name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        with open(self.root / f"{log_name}.log", "ab") as log:
            proc = subprocess.Popen(
                argv, env=self.env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.sessions.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def add_worker(self, name: str, queues: str, concurrency: int) -> None:
        self.workers[name] = Worker(name, queues, concurrency)
        self._spawn(self.workers[name])

    def _spawn(self, w: Worker) -> None:
        w.generation += 1
        argv = [CELERY, "-A", "chaos_fleet", "worker", "-P", "prefork", "-Q", w.queues, "-c", str(w.concurrency)]
        argv += ["-n", f"{w.name}-{w.generation}@%h", "--loglevel", "INFO", "--without-mingle", "--without-gossip"]
        w.proc = self._start(w.name, argv)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until every worker's log shows as many ``ready.`` lines as it has generations."""
        deadline = time.monotonic() + timeout
        for w in self.workers.values():
            while self.log(w.name).count(" ready.") < w.generation:
                if w.proc is not None and w.proc.poll() is not None:
                    raise RuntimeError(f"worker {w.name} exited {w.proc.returncode}:\n{self.log(w.name)[-3000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {w.name} not ready after {timeout}s:\n{self.log(w.name)[-3000:]}")
                time.sleep(0.2)

    def add_clock(self, name: str, *args: str) -> None:
        self.clocks.append(self._start(name, [sys.executable, str(HERE / "chaos_clock.py"), *args]))

    def children(self, name: str) -> list[int]:
        """The pool children of worker ``name``'s current parent."""
        proc = self.workers[name].proc
        if proc is None or proc.poll() is not None:
            return []
        try:
            raw = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text()
        except OSError:
            return []
        return [int(pid) for pid in raw.split()]

    def parent_of(self, pid: int) -> str | None:
        for w in self.workers.values():
            if pid in self.children(w.name):
                return w.name
        return None

    def kill_parent(self, name: str) -> tuple[int, list[int]]:
        """SIGKILL worker ``name``'s parent alone, as an OOM kill would (billiard's pool children
        die with it: they are started with ``PR_SET_PDEATHSIG``). Returns its pid and its children's."""
        w = self.workers[name]
        assert w.proc is not None
        children = self.children(name)
        self.killed.add(w.proc.pid)
        os.kill(w.proc.pid, signal.SIGKILL)
        w.proc.wait(10)
        return w.proc.pid, children

    @staticmethod
    def kill_pid(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def revive(self) -> list[str]:
        """Start again every worker whose parent is gone; returns their names."""
        dead = [w for w in self.workers.values() if w.proc is None or w.proc.poll() is not None]
        for w in dead:
            if w.proc is not None and w.proc.pid not in self.killed:
                last = [line for line in self.log(w.name).splitlines() if "Unrecoverable error" in line][-1:]
                self.unexpected.append(f"{w.name} pid {w.proc.pid} exited {w.proc.returncode}: {last or 'see its log'}")
            self._spawn(w)
        return [w.name for w in dead]

    def stop_all(self, timeout: float = 20.0) -> None:
        """Every session ever started: SIGTERM (warm) the live ones, then SIGKILL each group."""
        for proc in self.sessions:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.sessions:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
        for proc in self.sessions:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
