"""The private shape of kombu that :mod:`alma_schedule.compat.kombu` relies on, held against the
INSTALLED kombu (no mock): ``Connection._reraise_as_library_errors`` turns a transport's
recoverable error into kombu's ``OperationalError``, as Celery's ``send_task`` relies on, on the
memory and the Redis transports' own error classes (no server: a kombu connection connects lazily);
the guarded Redis channel on the shared Redis, and on a redis-server of a test's own where one dies."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kombu
import pytest
import redis
from kombu.exceptions import OperationalError

from alma_schedule.compat.kombu import (
    GuardedChannel,
    guarded_connection,
    guarded_transport,
    read_envelope,
    reraise_as_library_errors,
)


def test_the_context_manager_is_there() -> None:
    params = inspect.signature(kombu.Connection._reraise_as_library_errors).parameters
    assert list(params)[:1] == ["self"]
    assert all(p.default is not inspect.Parameter.empty for p in list(params.values())[1:])


@pytest.mark.parametrize("url", ["memory://", "redis://127.0.0.1:1/0"])
def test_a_recoverable_connection_error_leaves_as_kombus_operational_error(url: str) -> None:
    conn = kombu.Connection(url)
    try:
        error = conn.recoverable_connection_errors[0]
        with pytest.raises(OperationalError) as caught, reraise_as_library_errors(conn):
            raise error("the broker went away")
        assert isinstance(caught.value.__cause__, error)
        assert "the broker went away" in str(caught.value)
    finally:
        conn.release()


def test_redis_errors_are_recoverable_and_become_operational_errors() -> None:
    conn = kombu.Connection("redis://127.0.0.1:1/0")
    try:
        assert redis.exceptions.ConnectionError in conn.recoverable_connection_errors
        with pytest.raises(OperationalError) as caught, reraise_as_library_errors(conn):
            raise redis.exceptions.ConnectionError("Connection refused")
        assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)
    finally:
        conn.release()


def test_other_errors_pass_through_unchanged() -> None:
    conn = kombu.Connection("memory://")
    try:
        with pytest.raises(ValueError, match="ours"), reraise_as_library_errors(conn):
            raise ValueError("ours")
        with pytest.raises(OperationalError), reraise_as_library_errors(conn):
            raise OperationalError("already kombu's")
        with reraise_as_library_errors(conn):
            pass
    finally:
        conn.release()


# ------------------------------------------------------------------ the guarded Redis channel

#: The three methods :class:`GuardedChannel` repeats with its own decode, by a digest of kombu's
#: source (comments and indentation left out): kombu 5.7.0's. A kombu that changes one fails here;
#: compare the new source with ours in ``alma_schedule/compat/kombu.py``, then update the digest.
OVERRIDDEN = {
    "_brpop_read": "f7e4afb7bac8b174",
    "_get": "1038c853d4937cc0",
    "_receive_one": "68b2fff5d0d0ac38",
    "_connparams": "455a1276f64e726f",  # wrapped, not repeated: it still reads ``self.connection.client``
}


def source_digest(function: object) -> str:
    lines = (line.strip() for line in inspect.getsource(function).splitlines())  # type: ignore[arg-type]
    text = "\n".join(line for line in lines if line and not line.startswith("#"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_the_methods_the_guard_repeats_are_kombus_own_of_this_version() -> None:
    from kombu.transport.redis import Channel, SentinelChannel, SentinelTransport, Transport

    for name, digest in OVERRIDDEN.items():
        theirs, ours = getattr(Channel, name), getattr(GuardedChannel, name)
        assert list(inspect.signature(theirs).parameters) == list(inspect.signature(ours).parameters), name
        assert source_digest(theirs) == digest, f"kombu's Channel.{name} changed: re-read it against ours"
        assert name not in SentinelChannel.__dict__, name  # the sentinel channel uses the same
    params = inspect.signature(Channel._deliver_fanout_message).parameters
    assert list(params) == ["self", "message", "exchange"]  # what our _receive_one calls
    assert Transport.Channel is Channel and SentinelTransport.Channel is SentinelChannel


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("redis://127.0.0.1:1/0", "Transport"),
        ("rediss://127.0.0.1:1/0", "Transport"),
        ("sentinel://127.0.0.1:1;sentinel://127.0.0.1:2", "SentinelTransport"),
    ],
)
def test_a_guarded_connection_guards_every_redis_scheme_and_keeps_its_parameters(url: str, base: str) -> None:
    from kombu.transport import redis as kombu_redis

    plain, guarded = kombu.Connection(url), guarded_connection(kombu.Connection, lambda *a: None)(url)
    try:
        transport = guarded.get_transport_cls()
        assert transport.__bases__ == (getattr(kombu_redis, base),)
        assert issubclass(transport.Channel, GuardedChannel)
        assert issubclass(transport.Channel, getattr(kombu_redis, base).Channel)
        assert guarded.transport_cls == plain.transport_cls and guarded.ssl == plain.ssl  # rediss: its SSL default
        assert guarded.clone().get_transport_cls() is transport
        assert guarded_transport(transport) is transport
    finally:
        plain.release()
        guarded.release()


@pytest.mark.parametrize("url", ["memory://", "amqp://127.0.0.1:1//"])
def test_other_brokers_keep_their_own_transport(url: str) -> None:
    conn = guarded_connection(kombu.Connection, lambda *a: None)(url)
    try:
        assert conn.get_transport_cls() is kombu.Connection(url).get_transport_cls()
    finally:
        conn.release()


def test_the_messages_kombu_and_celery_send_are_envelopes_the_guard_takes(redis_url: str) -> None:
    import celery
    import redis

    with kombu.Connection(redis_url) as conn:
        conn.Producer().publish(
            b"\xff raw", routing_key="q", content_type="application/data", content_encoding="binary"
        )
        conn.Producer().publish({"a": [1, "é"]}, routing_key="q", headers={"h": 1}, priority=5, serializer="json")
        channel = conn.default_channel
        app = celery.Celery("envelopes", broker=redis_url, set_as_current=False)
        app.send_task("some.task", args=[1], queue="q", countdown=None)
        app.close()
        r = redis.Redis.from_url(redis_url)
        items = [item for key in r.keys("q*") for item in r.lrange(key, 0, -1)]  # "q" and its priority 5 list
        assert len(items) == 3
        for item in items:
            payload, problem = read_envelope(item, channel.decode_body)
            assert problem is None and payload == json.loads(item)
            channel.Message(payload, channel=channel)  # kombu's own reading of it


GARBAGE = [b"garbage-not-an-envelope", b'{"body": 1}', b"\xff\xfe not UTF-8", b"[]", b'{"properties": {}}']


def test_kombus_own_channel_raises_on_garbage_and_loses_it(redis_url: str) -> None:
    """Why the guard exists: the item is popped, then the decode raises out of the channel."""
    import redis

    with kombu.Connection(redis_url) as conn:
        for item in GARBAGE:
            redis.Redis.from_url(redis_url).lpush("q", item)
            with pytest.raises((ValueError, KeyError, TypeError)):
                conn.default_channel.basic_get("q")
            assert redis.Redis.from_url(redis_url).llen("q") == 0


def test_a_guarded_channel_hands_garbage_over_and_serves_the_next_message(redis_url: str) -> None:
    import redis

    refused: list[tuple[bytes, str, str]] = []
    r = redis.Redis.from_url(redis_url)
    with guarded_connection(kombu.Connection, lambda *a: refused.append(a))(redis_url) as conn:
        for item in GARBAGE:
            r.lpush("q", item)
        conn.Producer().publish({"n": 1}, routing_key="q", serializer="json")
        channel = conn.default_channel
        got = [channel.basic_get("q", no_ack=True) for _ in range(len(GARBAGE) + 1)]  # _get
        assert got[: len(GARBAGE)] == [None] * len(GARBAGE) and got[-1].payload == {"n": 1}
        assert [(raw, queue) for raw, queue, _why in refused] == [(item, "q") for item in GARBAGE]
        assert all(why for _raw, _q, why in refused)

        received: list[object] = []  # BRPOP, through the poller drain_events uses
        for item in GARBAGE:
            r.lpush("q", item)
        conn.Producer().publish({"n": 2}, routing_key="q", serializer="json")
        with conn.Consumer(kombu.Queue("q"), callbacks=[lambda body, m: (received.append(body), m.ack())]):
            while not received:
                with contextlib.suppress(TimeoutError):
                    conn.drain_events(timeout=5)
        assert received == [{"n": 2}] and len(refused) == 2 * len(GARBAGE) and r.llen("q") == 0


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test's own (it is killed: never the shared one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen([*argv, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0", proc
    proc.kill()
    proc.wait(10)


def _left_open_after_a_lost_redis(conn: kombu.Connection, proc: subprocess.Popen[bytes]) -> Any:
    """Two channels, each holding one unacked delivery; Redis dies; the connection is collected, as
    Celery's consumer does on a lost connection (``on_connection_error_after_connected``): the first
    channel's close fails restoring its delivery (Redis is down), kombu stops closing there and lets
    go of the transport (``transport.client = None``): the second channel is left open. Returns it."""
    channels = [conn.channel(), conn.channel()]
    for n, channel in enumerate(channels):
        queue = kombu.Queue(f"q_lost_{n}")
        conn.Producer(channel).publish({"n": n}, routing_key=queue.name, declare=[queue], serializer="json")
        with conn.Consumer(queue, channel=channel, callbacks=[lambda body, m: None]):
            conn.drain_events(timeout=5)
        assert len(channel.qos._delivered) == 1  # received, not acked
    proc.kill()
    proc.wait(10)
    conn.collect()
    left = [c for c in channels if not c.closed]
    assert len(left) == 1
    return left[0]


def test_kombus_own_channel_left_open_by_a_lost_redis_raises_attribute_error_on_close(
    own_redis: tuple[str, subprocess.Popen[bytes]],
) -> None:
    """Why ``_connparams`` is wrapped: closing the channel left open restores its delivery through a
    new pool built from ``transport.client``, which is None: an AttributeError, unrecoverable for
    Celery's consumer (a chaos run's worker exited on it: ``'NoneType' object has no attribute 'hostname'``)."""
    url, proc = own_redis
    channel = _left_open_after_a_lost_redis(kombu.Connection(url), proc)
    with pytest.raises(AttributeError, match="hostname"):
        channel.close()


def test_a_guarded_channel_left_open_by_a_lost_redis_raises_a_connection_error_on_close(
    own_redis: tuple[str, subprocess.Popen[bytes]],
) -> None:
    from kombu.common import ignore_errors

    url, proc = own_redis
    conn = guarded_connection(kombu.Connection, lambda *a: None)(url)
    channel = _left_open_after_a_lost_redis(conn, proc)
    with pytest.raises(redis.exceptions.ConnectionError, match="connection is closed") as caught:
        channel.close()
    assert isinstance(caught.value, conn.connection_errors)  # recoverable: Celery's consumer reconnects
    ignore_errors(conn, channel.close)  # Celery's way of closing a step's channel: swallowed
