"""Issue 45, item 10 (serve-http's side): ``/metrics`` shows a scoped user only what its overview
shows, a weak password hash refuses the app, the new settings are checked, and uvicorn runs with
serve-http's limits: a real server refuses an oversized head and answers a request that outlives
its deadline with 503."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import uvicorn
from dashboard_support import PASSWORD, USER, auth, client, dashboard_settings, seeded_store, wait_until
from prometheus_client.parser import text_string_to_metric_families

from alma_schedule.dashboard.auth import Credentials, hash_password
from alma_schedule.errors import ConfigurationError
from alma_schedule.http import create_http_app
from alma_schedule.http_limits import LIMIT_CONCURRENCY, MAX_HEAD_BYTES, TIMEOUT_KEEP_ALIVE, uvicorn_options
from alma_schedule.settings import Secret, load_settings

CLOCK_ONLY = {"alma_last_tick_timestamp_seconds", "alma_next_wake_timestamp_seconds"}
SECRET = "tick-secret-of-the-clock"


def _names(text: str) -> set[str]:
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_show_a_scoped_user_no_fleet_wide_series() -> None:
    store = seeded_store()
    with client(store, metrics_token=Secret("scrape-me")) as scoped:  # ALMA_DASHBOARD_SCOPES=org-a/*
        mine = scoped.get("/metrics", headers=auth())
        assert mine.status_code == 200
        assert _names(mine.text) <= CLOCK_ONLY and "alma_last_tick_timestamp_seconds" in _names(mine.text)
        token = scoped.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
        assert {"alma_routines", "alma_runs_blocked"} <= _names(token.text)  # the scrape token: everything
    with client(store, dashboard_scopes="*") as fleet:
        assert {"alma_routines", "alma_runs_blocked"} <= _names(fleet.get("/metrics", headers=auth()).text)


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (hash_password(PASSWORD, n=2**10, salt=b"fixed-salt-16byt"), "n=1024, r=8"),
        (hash_password(PASSWORD, n=2**14, r=4, salt=b"fixed-salt-16byt"), "n=16384, r=4"),
        ("scrypt$2$1$1$c2FsdHNhbHQ=$" + "A" * 44, "n=2, r=1"),
    ],
    ids=["n=1024", "r=4", "n=2"],  # the same ids in every xdist process
)
def test_a_password_hash_below_n_2_14_r_8_refuses_the_app(stored: str, shown: str) -> None:
    with pytest.raises(ConfigurationError, match=f"ALMA_DASHBOARD_PASSWORD_HASH is scrypt {shown}: .*n=16384, r=8"):
        Credentials(USER, stored)
    with pytest.raises(ConfigurationError, match="ALMA_DASHBOARD_PASSWORD_HASH"):
        create_http_app(dashboard_settings(dashboard_password_hash=Secret(stored)), store=seeded_store())
    assert Credentials(USER, hash_password(PASSWORD)).check(auth()["Authorization"]) == USER


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"ALMA_TRUSTED_PROXIES": "10.0.0.1,proxy.internal"}, "ALMA_TRUSTED_PROXIES: 'proxy.internal' is not an"),
        ({"ALMA_TRUSTED_PROXIES": "10.0.0.0/33"}, "ALMA_TRUSTED_PROXIES: '10.0.0.0/33' is not an"),
        ({"ALMA_METRICS_BIND": "everywhere"}, "ALMA_METRICS_BIND: 'everywhere' is not an address"),
    ],
)
def test_the_new_settings_are_checked(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        load_settings(environ=environ)


def test_the_new_settings_defaults_and_values() -> None:
    s = load_settings(environ={})
    assert s.metrics_bind == "127.0.0.1" and s.trusted_proxies == () and s.dashboard_origin is None
    s = load_settings(environ={"ALMA_TRUSTED_PROXIES": "10.0.0.0/8, ::1", "ALMA_METRICS_BIND": "0.0.0.0"})
    assert s.trusted_proxies == ("10.0.0.0/8", "::1") and s.metrics_bind == "0.0.0.0"


def test_uvicorn_runs_with_serve_https_limits() -> None:
    options = uvicorn_options(host="127.0.0.1", port=8080, log_level="info")
    assert options["limit_concurrency"] == LIMIT_CONCURRENCY
    assert options["timeout_keep_alive"] == TIMEOUT_KEEP_ALIVE
    assert options["http"] == "h11" and options["h11_max_incomplete_event_size"] == MAX_HEAD_BYTES
    assert options["proxy_headers"] is False and options["server_header"] is False
    config = uvicorn.Config(create_http_app(dashboard_settings(), store=seeded_store()), **options)
    assert config.limit_concurrency == LIMIT_CONCURRENCY  # uvicorn takes every keyword


@pytest.fixture
def served() -> Iterator[int]:
    """The app with a 1 s request deadline under uvicorn with serve-http's options; its port."""
    app = create_http_app(dashboard_settings(), store=seeded_store(), send=lambda s, n: "t", deadline=1.0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, **uvicorn_options(host="127.0.0.1", port=port, log_level="warning")))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 30, "uvicorn started")
        yield port
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` and read the answer until the server closes (a hang guard, not a timing assert)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        conn.sendall(raw)
        got = b""
        while chunk := conn.recv(65536):  # each exchange here ends with the server closing
            got += chunk
        return got


@pytest.mark.integration  # a real server; the deadline is a real second
def test_a_real_server_refuses_an_oversized_head_and_ends_a_stalled_body(served: int) -> None:
    endless = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (MAX_HEAD_BYTES + 1024)  # no end yet
    assert _exchange(served, endless).startswith(b"HTTP/1.1 4")  # refused past 16 KiB, before the app
    stalled = (
        f"POST /tick HTTP/1.1\r\nHost: x\r\nX-Alma-Secret: {SECRET}\r\nContent-Length: 100\r\n\r\n".encode()
        + b'{"now": '  # then nothing more: the body never ends
    )
    answer = _exchange(served, stalled)
    assert answer.startswith(b"HTTP/1.1 503") and b"the request took too long" in answer
    assert b"content-security-policy" in answer.lower()
    ok = _exchange(served, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200")  # the server serves on
