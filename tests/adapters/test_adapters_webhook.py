"""WebhookSink against a local receiver on 127.0.0.1 that verifies signatures; verify_signature itself."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from adapters_support import WEBHOOK_SECRET, held_port

from alma_schedule.errors import ConfigurationError, SinkError
from alma_schedule.model import RunKey, Scope, governed_key
from alma_schedule.runners.adapters.webhook import WebhookSink, sign, verify_signature
from alma_schedule.runners.governed.protocols import Delivery, Sink
from alma_schedule.settings import Secret, Settings
from alma_schedule.testing.servers import RunningServer, serve_asgi
from alma_schedule.testing.webhook_receiver import WebhookReceiver

KEY = RunKey("acme", "u1", "brief", "2026-01-05T08:00:00Z")
T0 = datetime(2026, 1, 5, 8, 0, 3, tzinfo=UTC)


def delivery(text: str = "Good morning: nothing burns. Ünïcode ✓") -> Delivery:
    return Delivery.for_run(KEY, text, 1234, ("per_turn_usd",), kind="turn")


def test_a_signed_delivery_verifies_at_the_receiver(receiver: WebhookReceiver, receiver_server: RunningServer) -> None:
    with WebhookSink(receiver_server.url + "/hooks/alma", WEBHOOK_SECRET, timeout=10) as sink:
        assert isinstance(sink, Sink)
        sink.deliver(delivery())

    (got,) = receiver.received
    assert got.verified and got.status == 204
    assert receiver.deliveries == [got]
    assert got.path == "/hooks/alma"
    assert got.idempotency_key == governed_key(Scope("acme", "u1"), "brief", KEY.run_id)
    assert got.headers["content-type"] == "application/json"
    assert got.json == delivery().to_dict()
    assert got.json["text"].endswith("✓")
    ts = got.headers["x-alma-timestamp"]
    # The signature is exactly HMAC-SHA256 over "{timestamp}.{body}", recomputed here by hand.
    mac = hmac.new(WEBHOOK_SECRET.encode(), f"{ts}.".encode() + got.body, hashlib.sha256).hexdigest()
    assert got.headers["x-alma-signature"] == f"sha256={mac}"


def test_the_receiver_rejects_a_sink_with_the_wrong_secret(
    receiver: WebhookReceiver, receiver_server: RunningServer
) -> None:
    with WebhookSink(receiver_server.url, Secret("not-the-secret"), timeout=10) as sink:
        with pytest.raises(SinkError) as info:
            sink.deliver(delivery())
    assert info.value.reason == "sink_error"
    assert "HTTP 401" in str(info.value)
    assert [r.verified for r in receiver.received] == [False]
    assert receiver.deliveries == []


def test_without_a_secret_no_signature_headers_are_sent() -> None:
    receiver = WebhookReceiver(None, status=200)
    with serve_asgi(receiver.app) as server, WebhookSink(server.url, None, timeout=10) as sink:
        assert not sink.signed
        sink.deliver(delivery())
    (got,) = receiver.received
    assert "x-alma-signature" not in got.headers and "x-alma-timestamp" not in got.headers
    assert got.idempotency_key == delivery().idempotency_key


@pytest.mark.parametrize("status", [500, 503, 404, 302, 400])
def test_a_non_2xx_answer_raises_sink_error_after_one_attempt(
    receiver: WebhookReceiver, receiver_server: RunningServer, status: int
) -> None:
    receiver.status = status
    with WebhookSink(receiver_server.url, WEBHOOK_SECRET, timeout=10) as sink:
        with pytest.raises(SinkError) as info:
            sink.deliver(delivery())
    assert info.value.reason == "sink_error"
    assert f"HTTP {status}" in str(info.value)
    assert len(receiver.received) == 1  # no retry, no redirect followed


def test_a_timeout_raises_sink_error(receiver: WebhookReceiver, receiver_server: RunningServer) -> None:
    receiver.stall_next(seconds=10)
    with WebhookSink(receiver_server.url, WEBHOOK_SECRET, timeout=0.4) as sink:
        with pytest.raises(SinkError) as info:
            sink.deliver(delivery())
    assert info.value.reason == "sink_error"
    assert "timed out" in str(info.value)


def test_an_unreachable_receiver_raises_sink_error() -> None:
    with held_port() as port:  # the port stays ours after the server is gone: nobody else listens there
        with serve_asgi(WebhookReceiver().app, port=port) as server:
            url = server.url
        with WebhookSink(url, WEBHOOK_SECRET, timeout=2) as sink, pytest.raises(SinkError) as info:
            sink.deliver(delivery())
    assert "ConnectError" in str(info.value)


def test_the_secret_and_the_url_token_never_leak(
    receiver: WebhookReceiver, receiver_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = "T0KEN-in-the-path-9d2e"
    receiver.status = 500
    texts: list[str] = []
    with WebhookSink(f"{receiver_server.url}/hook/{token}?sig={token}", WEBHOOK_SECRET, timeout=10) as sink:
        texts += [repr(sink), str(sink), sink.identity]
        assert sink.identity != WebhookSink(receiver_server.url, WEBHOOK_SECRET).identity
        with pytest.raises(SinkError) as info:
            sink.deliver(delivery())
    texts += [str(info.value), repr(info.value)]
    texts += [r.getMessage() for r in caplog.records if r.name.startswith("alma_schedule")]
    assert any("HTTP 500" in t for t in texts)
    assert not [t for t in texts if token in t or WEBHOOK_SECRET in t]


def test_from_settings(receiver: WebhookReceiver, receiver_server: RunningServer) -> None:
    settings = Settings(
        webhook_url=receiver_server.url,
        webhook_secret=Secret(WEBHOOK_SECRET),
        webhook_timeout=timedelta(seconds=3),
    )
    with WebhookSink.from_settings(settings) as sink:
        assert sink.timeout == 3.0 and sink.signed
        sink.deliver(delivery())
    assert receiver.deliveries and receiver.deliveries[0].verified
    with pytest.raises(ConfigurationError, match="ALMA_WEBHOOK_URL"):
        WebhookSink.from_settings(Settings())
    with pytest.raises(ConfigurationError):
        WebhookSink("ftp://example.org/x")


def test_the_clock_gives_the_timestamp() -> None:
    receiver = WebhookReceiver(None, status=200)
    with (
        serve_asgi(receiver.app) as server,
        WebhookSink(server.url, WEBHOOK_SECRET, timeout=10, clock=lambda: T0) as sink,
    ):
        sink.deliver(delivery())
    got = receiver.received[0]
    assert got.headers["x-alma-timestamp"] == str(int(T0.timestamp()))
    ts, signature = got.headers["x-alma-timestamp"], got.headers["x-alma-signature"]
    assert verify_signature(WEBHOOK_SECRET, ts, got.body, signature, now=T0)


# ---------------------------------------------------------------------------- verify_signature


def test_verify_signature_accepts_only_the_exact_signed_body_within_tolerance() -> None:
    body = json.dumps({"text": "hello"}).encode()
    ts = int(T0.timestamp())
    good = sign(WEBHOOK_SECRET, ts, body)
    assert verify_signature(WEBHOOK_SECRET, str(ts), body, good, now=T0)
    assert verify_signature(Secret(WEBHOOK_SECRET), ts, body.decode(), good, now=T0.timestamp())
    assert verify_signature(WEBHOOK_SECRET.encode(), ts, body, good, now=T0 + timedelta(seconds=300))
    # wrong secret, tampered body, other timestamp, stale or future beyond tolerance, malformed
    assert not verify_signature("other", ts, body, good, now=T0)
    assert not verify_signature(WEBHOOK_SECRET, ts, body + b" ", good, now=T0)
    assert not verify_signature(WEBHOOK_SECRET, ts + 1, body, good, now=T0)
    assert not verify_signature(WEBHOOK_SECRET, ts, body, good, now=T0 + timedelta(seconds=301))
    assert not verify_signature(WEBHOOK_SECRET, ts, body, good, now=T0 - timedelta(seconds=301))
    assert verify_signature(WEBHOOK_SECRET, ts, body, good, now=T0, tolerance=0)
    assert not verify_signature(WEBHOOK_SECRET, None, body, good, now=T0)
    assert not verify_signature(WEBHOOK_SECRET, "soon", body, good, now=T0)
    assert not verify_signature(WEBHOOK_SECRET, ts, body, None, now=T0)
    assert not verify_signature(WEBHOOK_SECRET, ts, body, good.removeprefix("sha256="), now=T0)
    assert not verify_signature(WEBHOOK_SECRET, ts, body, "sha256=é" + good[8:], now=T0)
