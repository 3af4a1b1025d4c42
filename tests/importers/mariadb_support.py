"""A private MariaDB server for one test (its own data dir, unix socket and port in tmp; never the
system's), or a skip saying why when this machine has no MariaDB server binary."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SERVER = "/usr/sbin/mariadbd"
DEADLINE = 120.0  # generous: a slow machine only waits longer, it never fails sooner


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def mariadb_server(tmp: Path) -> Iterator[tuple[str, str]]:
    """``(unix socket path, database name)`` of a fresh server with an empty database, stopped after."""
    install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
    if not Path(SERVER).exists() or install is None:
        pytest.skip(f"no MariaDB server on this machine ({SERVER} or mariadb-install-db missing): MySQL not tested")
    data, sock = tmp / "mariadb", tmp / "mariadb.sock"
    subprocess.run(
        [install, "--no-defaults", f"--datadir={data}", "--user=root", "--auth-root-authentication-method=normal"],
        check=True,
        capture_output=True,
        timeout=240,
    )
    server = subprocess.Popen(
        [
            SERVER,
            "--no-defaults",
            f"--datadir={data}",
            f"--socket={sock}",
            f"--port={_free_port()}",
            "--bind-address=127.0.0.1",
            "--user=root",
            "--skip-grant-tables",
            f"--pid-file={tmp / 'mariadb.pid'}",
            f"--log-error={tmp / 'mariadb.err'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import pymysql

        end = time.monotonic() + DEADLINE
        while True:
            try:
                conn = pymysql.connect(unix_socket=str(sock), user="root")
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > end or server.poll() is not None:
                    raise AssertionError((tmp / "mariadb.err").read_text()[-2000:]) from None
                time.sleep(0.2)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE dcb CHARACTER SET utf8mb4")
        conn.close()
        yield str(sock), "dcb"
    finally:
        server.terminate()
        server.wait(timeout=120)
