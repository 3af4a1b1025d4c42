"""Constants shared by the adapter tests (a plain module: conftest is not for importing)."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

API_KEY = "sk-test-Zq81-very-secret-key-0042"
WEBHOOK_SECRET = "whsec-test-5b0c-secret"
PRICE_IN = 150_000  # micro-USD per million input tokens
PRICE_OUT = 600_000  # micro-USD per million output tokens


def expected_cost(usage: dict[str, Any], price_in: int = PRICE_IN, price_out: int = PRICE_OUT) -> int:
    """usage x prices in micro-USD, rounded up: computed independently of the adapter."""
    exact = (usage["prompt_tokens"] * price_in + usage["completion_tokens"] * price_out) / 1_000_000
    return math.ceil(exact - 1e-12)


@contextmanager
def held_port() -> Iterator[int]:
    """A port of 127.0.0.1 this process keeps bound (SO_REUSEADDR, never listening) until the block
    ends: a server given it (``serve_asgi(port=...)``) can still bind and listen on it, and after
    that server is gone the port stays unreachable -- no concurrent process can take it meanwhile."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()
