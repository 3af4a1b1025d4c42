"""Issue 45, item 2: a wrong password costs the server almost nothing, and never its health check.

serve-http's app under a real uvicorn (run with serve-http's own options) on a free port; 200
requests with wrong Basic credentials, 50 at a time over 50 connections, from 5 clients behind a
trusted proxy (``X-Forwarded-For``), while ``/healthz`` is polled. Counted, never timed: every
wrong request refused, each client refused with 429 and ``Retry-After`` after its 10th failure,
``/healthz`` 200 throughout, at most 2 scrypt computations at once (read from the process's
scrypt gate) and each on the gate's own threads. The throttle's numbers and the remembered login
are checked through the same app and on :class:`LoginThrottle` itself.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from dashboard_support import PASSWORD, USER, auth, client, dashboard_settings, seeded_store, wait_until

from alma_schedule.dashboard.scrypt_gate import GATE, THREAD_PREFIX, WORKERS
from alma_schedule.dashboard.throttle import FAILURES_ALLOWED, LOCKOUT_SECONDS, LoginThrottle, client_of
from alma_schedule.http import create_http_app
from alma_schedule.http_limits import uvicorn_options

CLIENTS = [f"203.0.113.{n}" for n in range(5)]
FLOOD, AT_ONCE = 200, 50


@pytest.fixture
def served() -> Iterator[str]:
    """The app (trusting 127.0.0.1 as a proxy) under uvicorn with serve-http's options."""
    settings = dashboard_settings(trusted_proxies=("127.0.0.1",), metrics_token=None)
    app = create_http_app(settings, store=seeded_store(), send=lambda s, n: "t")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    options = uvicorn_options(host="127.0.0.1", port=sock.getsockname()[1], log_level="warning")
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 30, "uvicorn started")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


async def _flood(base: str) -> tuple[list[tuple[str, httpx.Response]], list[int]]:
    health: list[int] = []
    done = asyncio.Event()
    limits = httpx.Limits(max_connections=AT_ONCE, max_keepalive_connections=AT_ONCE)
    async with (
        httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as flood,
        httpx.AsyncClient(base_url=base, timeout=120) as probe,
    ):
        gate = asyncio.Semaphore(AT_ONCE)

        async def one(i: int) -> tuple[str, httpx.Response]:
            who = CLIENTS[i % len(CLIENTS)]
            headers = {**auth(password=f"wrong-{i}"), "X-Forwarded-For": f"198.51.100.9, {who}"}
            async with gate:
                return who, await flood.get("/metrics" if i % 4 == 0 else "/dashboard/", headers=headers)

        async def poll() -> None:
            while not done.is_set():
                health.append((await probe.get("/healthz")).status_code)
                await asyncio.sleep(0.02)

        poller = asyncio.create_task(poll())
        try:
            answers = await asyncio.gather(*(one(i) for i in range(FLOOD)))
        finally:
            done.set()
            await poller
    return list(answers), health


@pytest.mark.integration  # a real server and real concurrency
def test_a_flood_of_wrong_passwords_is_refused_bounded_and_never_stalls_healthz(served: str) -> None:
    good = auth()
    with httpx.Client(base_url=served, timeout=60) as c:
        assert c.get("/dashboard/", headers={**good, "X-Forwarded-For": CLIENTS[0]}).status_code == 200  # remembered
    GATE.reset_counts()
    answers, health = asyncio.run(_flood(served))

    statuses = Counter(r.status_code for _, r in answers)
    assert set(statuses) <= {401, 429} and sum(statuses.values()) == FLOOD  # every wrong request refused
    per_client = Counter(who for who, r in answers if r.status_code == 401)
    assert per_client == dict.fromkeys(CLIENTS, FAILURES_ALLOWED)  # then each client is refused
    assert statuses[429] == FLOOD - len(CLIENTS) * FAILURES_ALLOWED
    for _, r in answers:
        if r.status_code == 429:
            assert 1 <= int(r.headers["retry-after"]) <= LOCKOUT_SECONDS
        else:
            assert r.headers["www-authenticate"].startswith("Basic realm=")
    assert health and set(health) == {200}  # /healthz answered 200 throughout
    assert 1 <= GATE.peak <= WORKERS == 2  # at most 2 scrypt computations at once
    assert GATE.computed == statuses[401]  # no scrypt for a refused client
    assert GATE.threads and all(name.startswith(THREAD_PREFIX) for name in GATE.threads)

    with httpx.Client(base_url=served, timeout=60) as c:
        locked = {"X-Forwarded-For": CLIENTS[0]}
        assert c.get("/dashboard/", headers={**good, **locked}).status_code == 200  # remembered: before the throttle
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        fresh = {"Authorization": f"basic {token}"}  # right, but not remembered yet
        refused = c.get("/dashboard/", headers={**fresh, **locked})
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        other = c.get("/dashboard/", headers={**fresh, "X-Forwarded-For": "192.0.2.77"})
        assert other.status_code == 200  # another client is not refused


@pytest.mark.integration  # five failed answers are each slowed by a real second
def test_an_operators_typos_are_never_a_lockout() -> None:
    with client(seeded_store()) as c:
        for n in range(FAILURES_ALLOWED - 1):
            assert c.get("/dashboard/", headers=auth(password=f"typo-{n}")).status_code == 401
        assert c.get("/dashboard/", headers=auth()).status_code == 200
        for n in range(FAILURES_ALLOWED - 1):  # the success cleared the count: nine more are still typos
            assert c.get("/dashboard/", headers=auth(password=f"again-{n}")).status_code == 401


def test_the_throttle_slows_then_refuses_and_forgets_after_its_window() -> None:
    now = {"t": 1000.0}
    throttle = LoginThrottle(monotonic=lambda: now["t"])
    slows = [throttle.failed("a") for _ in range(FAILURES_ALLOWED - 1)]
    assert [s for s, _ in slows] == [0.0] * 4 + [1.0] * 5 and not any(r for _, r in slows)
    assert throttle.retry_after("a") is None
    now["t"] += 61  # the window slid: nine more failures are still not ten in a minute
    assert not any(throttle.failed("a")[1] for _ in range(FAILURES_ALLOWED - 1))
    assert throttle.failed("a") == (0.0, True)
    assert throttle.retry_after("a") == LOCKOUT_SECONDS and throttle.retry_after("b") is None
    now["t"] += LOCKOUT_SECONDS - 0.5
    assert throttle.retry_after("a") == 1
    now["t"] += 1
    assert throttle.retry_after("a") is None


def test_the_client_is_the_peer_or_the_forwarded_address_behind_a_trusted_proxy() -> None:
    from alma_schedule.dashboard.throttle import trusted_networks

    nets = trusted_networks(["10.0.0.0/8", "127.0.0.1"])
    forwarded = {"x-forwarded-for": "6.6.6.6, 203.0.113.5, 10.1.2.3"}
    assert client_of({"client": ("127.0.0.1", 5)}, forwarded, nets) == "203.0.113.5"  # right-most untrusted
    assert client_of({"client": ("192.0.2.1", 5)}, forwarded, nets) == "192.0.2.1"  # the peer is no proxy
    assert client_of({"client": ("127.0.0.1", 5)}, forwarded, ()) == "127.0.0.1"  # no proxy trusted
    assert client_of({"client": ("127.0.0.1", 5)}, {}, nets) == "127.0.0.1"
