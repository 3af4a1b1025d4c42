"""The chaos suite's own servers: a Redis and a PostgreSQL cluster on free ports, which it may kill.

Nothing here touches the shared servers (5432, 6379). Redis runs without persistence (``--save ""
--appendonly no``): a restart loses every queued message and result, as a crashed broker would.
PostgreSQL is a throw-away cluster made by ``initdb`` as the ``postgres`` user (``initdb`` refuses
root) in a temp dir, started with ``pg_ctl`` on its own port and socket dir, ``fsync`` off but
``synchronous_commit`` on (an acknowledged commit survives the server's crash, as in production);
``restart_immediate`` is ``pg_ctl restart -m immediate`` (crash recovery at start),
``terminate_backends`` is ``pg_terminate_backend`` on every other connection to our database.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psycopg


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def pg_bin(name: str) -> str:
    """``/usr/lib/postgresql/<newest>/bin/<name>`` (Debian keeps the server tools off PATH)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError(f"no /usr/lib/postgresql/*/bin/{name}: install PostgreSQL's server package")
    return found[-1]


class RedisServer:
    """``redis-server`` on a free port, in its own session, no persistence."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.log = root / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--daemonize", "no", "--logfile", str(self.log), "--protected-mode", "no"]
        self.proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(self.ping, 30, f"redis on port {self.port}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is saved (there is no persistence anyway)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def restart(self, down: float) -> None:
        self.kill()
        time.sleep(down)
        self.start()


class PgCluster:
    """A PostgreSQL cluster of our own, owned by ``postgres``, data and socket under ``root/pg``."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.dir = root / "pg"
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.started = False

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/alma"

    @property
    def libpq(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/alma"

    def _as_postgres(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = list(argv) if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done

    def create(self) -> None:
        self.dir.mkdir(parents=True)
        os.chmod(self.dir.parent, 0o755)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self._as_postgres(pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def _options(self) -> str:
        opts = [f"-p {self.port}", f"-k {self.dir}", "-c listen_addresses=127.0.0.1", "-c max_connections=300"]
        # fsync / full_page_writes off only risk an OS crash, which the chaos never causes; an
        # immediate restart is a server crash: synchronous_commit must stay on (the README's
        # "a claim must survive a crash"), or acknowledged CAS commits vanish and a fire runs twice
        opts += ["-c fsync=off", "-c full_page_writes=off"]
        return " ".join(opts)

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._as_postgres(
            pg_bin("pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            self._options(),
            "-w",
            "-t",
            "60",
            *args,
            check=check,
        )

    def start(self) -> None:
        self._ctl("start")
        self.started = True
        _wait(self.ready, 60, f"postgres on port {self.port}")

    def ready(self) -> bool:
        try:
            with psycopg.connect(self.libpq.replace("/alma", "/postgres"), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def create_database(self) -> None:
        with psycopg.connect(self.libpq.replace("/alma", "/postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE alma")

    def restart_immediate(self) -> None:
        """``pg_ctl restart -m immediate``: every backend dies at once, crash recovery at start."""
        self._ctl("restart", "-m", "immediate")
        _wait(self.ready, 60, f"postgres on port {self.port} after the restart")

    def terminate_backends(self) -> int:
        """``pg_terminate_backend`` on every other connection to our database; how many it ended."""
        with psycopg.connect(self.libpq, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = 'alma' AND pid <> pg_backend_pid()"
            ).fetchall()
        return sum(1 for (ok,) in rows if ok)

    def stop(self) -> None:
        if not self.started:
            return
        done = self._ctl("stop", "-m", "immediate", check=False)
        if done.returncode != 0:  # pg_ctl could not: the postmaster's pid from its pid file
            with contextlib.suppress(OSError, ValueError, IndexError):
                pid = int((self.data / "postmaster.pid").read_text().split()[0])
                os.kill(pid, signal.SIGKILL)
        self.started = False
