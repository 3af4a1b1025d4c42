"""Run an ASGI app on ``127.0.0.1:<free port>`` in a background thread (uvicorn), for tests and the demo.
docs/architecture.md, section "The modules, in detail" (testing/servers.py).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn


@dataclass(frozen=True, slots=True)
class RunningServer:
    """A server started by :func:`serve_asgi`: ``url`` is ``http://127.0.0.1:<port>`` (no trailing slash)."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@contextmanager
def serve_asgi(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    grace: float = 1.0,
    start_timeout: float = 10.0,
) -> Iterator[RunningServer]:
    """Serve ``app`` on ``host:port`` (0 = a free port) in a daemon thread until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
        http="h11",
        loop="asyncio",
        timeout_graceful_shutdown=int(max(1, grace)),
    )
    server = uvicorn.Server(config)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # reported to the caller on entry or exit
            errors.append(exc)

    thread = threading.Thread(target=target, name=f"asgi-{bound_port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if errors or not thread.is_alive():
            sock.close()
            raise RuntimeError(f"the ASGI server on port {bound_port} did not start: {errors!r}")
        if time.monotonic() > deadline:
            server.should_exit = True
            thread.join(grace + 2)
            sock.close()
            raise RuntimeError(f"the ASGI server on port {bound_port} did not start in {start_timeout}s")
        time.sleep(0.01)
    try:
        yield RunningServer(host, bound_port)
    finally:
        server.should_exit = True
        thread.join(grace + 5)
        if thread.is_alive():  # pragma: no cover - a stuck handler past the grace period
            server.force_exit = True
            thread.join(5)
        sock.close()
