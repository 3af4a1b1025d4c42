"""kombu's private parts that we use, each behind one function or class (``docs/architecture.md``,
"Private calls into dependencies"; pinned by ``tests/compat/test_compat_kombu.py``).
docs/architecture.md, section "The modules, in detail" (compat/kombu.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any

__all__ = ["RawRefusal", "guarded_connection", "guarded_transport", "read_envelope", "reraise_as_library_errors"]

log = logging.getLogger(__name__)

#: What a guarded channel calls with each item it refuses: ``(raw bytes, queue, reason)``.
RawRefusal = Callable[[bytes, str, str], None]


def reraise_as_library_errors(connection: Any) -> AbstractContextManager[None]:
    """``connection._reraise_as_library_errors()``: a transport's recoverable error raised again as
    kombu's ``OperationalError``, as Celery's ``app.send_task`` wraps its publish.

    docs/architecture.md, "The modules, in detail" (compat/kombu.py, reraise_as_library_errors).
    """
    manager: AbstractContextManager[None] = connection._reraise_as_library_errors()
    return manager


# ------------------------------------------------------------------ the envelope of a Redis item


_JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def envelope_problem(payload: Any, decode_body: Callable[[Any, Any], Any]) -> str | None:
    """Why the decoded ``payload`` is no envelope of kombu's virtual transports that kombu and
    Celery can take (``virtual.Message`` reads ``properties.delivery_tag`` and decodes the body;
    Redis's ``QoS.append`` reads ``delivery_info.exchange`` / ``routing_key``; ``_do_restore_message``
    writes into ``headers``), or None. ``decode_body`` is the channel's."""
    if not isinstance(payload, dict):
        kind = _JSON_NAMES.get(type(payload), type(payload).__name__)
        return f"the item is a JSON {kind}, not a kombu envelope"
    props = payload.get("properties")
    if not isinstance(props, dict):
        return "the envelope has no properties object"
    tag = props.get("delivery_tag")
    if not isinstance(tag, str) or not tag:
        return "properties.delivery_tag is not a text"
    info = props.get("delivery_info")
    if not isinstance(info, dict) or not (isinstance(info.get("exchange"), str) and _text(info.get("routing_key"))):
        return "properties.delivery_info is not an object with an exchange and a routing key"
    if not isinstance(payload.get("headers"), dict):
        return "the envelope's headers are not an object"
    if not (_text(payload.get("content-type")) and _text(payload.get("content-encoding"))):
        return "the envelope's content-type or content-encoding is not a text"
    body, encoding = payload.get("body"), props.get("body_encoding")
    if not isinstance(body, str):
        return "the envelope's body is not a text"
    if not _text(encoding):
        return "properties.body_encoding is not a text"
    try:
        decode_body(body, encoding)
    except Exception as exc:  # binascii.Error, TypeError, an unknown encoding (kombu's AttributeError)
        name = (
            type(exc).__qualname__
            if type(exc).__module__ == "builtins"
            else f"{type(exc).__module__}.{type(exc).__qualname__}"
        )
        return f"the body does not decode as {encoding!r}: {name}"
    return None


def read_envelope(raw: Any, decode_body: Callable[[Any, Any], Any]) -> tuple[Any, str | None]:
    """``(payload, None)``: ``raw`` (an item of a Redis list or a pub/sub message) decoded as kombu's
    Redis transport decodes it (``kombu.utils.json.loads``), when it is an envelope kombu and Celery
    can take (:func:`envelope_problem`); else ``(None, why)``. Never raises."""
    from kombu.utils.json import loads

    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    except UnicodeDecodeError:
        return None, "the item is not UTF-8 text"
    try:
        payload = loads(text)  # type: ignore[no-untyped-call]
    except Exception as exc:  # JSONDecodeError, RecursionError, a bad __type__ object
        return None, f"the item is not JSON: {type(exc).__name__}"
    problem = envelope_problem(payload, decode_body)
    return (payload, None) if problem is None else (None, problem)


# ------------------------------------------------------------------ the guarded channel


class GuardedChannel:
    """A mixin over kombu's Redis ``Channel`` (and ``SentinelChannel``): its three decoding methods with
    one change: the decode is :func:`read_envelope`, and a refused item goes raw to ``alma_refuse``;
    and ``_connparams`` raising a connection error, not ``AttributeError``, once the transport is gone.

    docs/architecture.md, "The modules, in detail" (compat/kombu.py, GuardedChannel).
    """

    def alma_envelope(self: Any, raw: Any, queue: str) -> Any:
        """The decoded envelope of ``raw``, or None after handing it to ``alma_refuse``."""
        payload, problem = read_envelope(raw, self.decode_body)
        if problem is not None:
            self.alma_refused(raw, queue, problem)
        return payload

    def alma_refused(self: Any, raw: Any, queue: str, problem: str) -> None:
        """Hand ``raw`` (as bytes) to the connection's ``alma_refuse``; never raises."""
        data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogateescape")
        refuse: RawRefusal | None = getattr(self.connection.client, "alma_refuse", None)
        try:
            if refuse is None:
                raise RuntimeError("no alma_refuse on this connection")
            refuse(data, queue, problem)
        except Exception as exc:  # the item is gone: this line is all that is left of it
            log.error(
                "alma_schedule: could not refuse an item of %s (%s): %r", queue, problem, data[:120], exc_info=exc
            )

    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        """kombu's, except on a channel whose transport its connection already let go of
        (``Connection.collect`` / ``_close`` set ``transport.client`` to None while the channel still
        holds unacked deliveries): kombu reads ``None.hostname`` there, an ``AttributeError`` that
        Celery's consumer takes as unrecoverable (the worker exits). We raise Redis's
        ``ConnectionError`` instead, an error of the transport's ``connection_errors``: Celery reconnects,
        and the unacked deliveries come back from the broker's unacked hash as after any lost connection."""
        transport = self.connection
        if transport is None or transport.client is None:
            from redis.exceptions import ConnectionError as RedisConnectionError

            raise RedisConnectionError("the channel's kombu connection is closed (its transport was let go)")
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]

    def _brpop_read(self: Any, **options: Any) -> bool:
        from queue import Empty

        from kombu.utils.encoding import bytes_to_str

        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if not dest__item:
                raise Empty()
            dest, item = dest__item
            dest = bytes_to_str(dest).rsplit(self.sep, 1)[0]  # type: ignore[no-untyped-call]
            self._queue_cycle.rotate(dest)
            payload = self.alma_envelope(item, dest)
            if payload is None:
                raise Empty()
            self.connection._deliver(payload, dest)
            return True
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

    def _get(self: Any, queue: str) -> Any:
        from queue import Empty

        with self.conn_or_acquire() as client:
            for pri in self.priority_steps:
                item = client.rpop(self._q_for_pri(queue, pri))
                if item:
                    self._maybe_update_queues_expire(client, queue)
                    payload = self.alma_envelope(item, queue)
                    if payload is None:
                        raise Empty()
                    return payload
            self._maybe_update_queues_expire(client, queue)
            raise Empty()

    def _receive_one(self: Any, c: Any) -> Any:
        from kombu.utils.encoding import bytes_to_str

        try:
            response = c.parse_response()
        except self.connection_errors:
            self._in_listen = None
            raise
        if not isinstance(response, (list, tuple)):
            return None
        payload = self._handle_message(c, response)
        kind: str = bytes_to_str(payload["type"])  # type: ignore[no-untyped-call]
        if not kind.endswith("message") or not payload["data"]:
            return None
        channel = bytes_to_str(payload["channel"])  # type: ignore[no-untyped-call]
        if channel[0] == "/":
            _, _, channel = channel.partition(".")
        exchange = channel.split("/", 1)[0]
        queue = self._fanout_to_queue.get(exchange)
        if queue is None:  # kombu's KeyError: no queue of this channel is bound to that exchange
            self.alma_refused(payload["data"], exchange, "no queue of this worker is bound to the exchange")
            return None
        message = self.alma_envelope(payload["data"], queue)
        if message is None:
            return None
        return self._deliver_fanout_message(message, exchange)


@lru_cache(maxsize=16)
def guarded_transport(transport: type[Any]) -> type[Any]:
    """``transport`` itself, or, for kombu's Redis transport or a subclass (``redis://``,
    ``rediss://``, ``sentinel://``), a subclass whose channels are :class:`GuardedChannel`."""
    from kombu.transport.redis import Transport

    if not (isinstance(transport, type) and issubclass(transport, Transport)):
        return transport
    if issubclass(transport.Channel, GuardedChannel):
        return transport
    channel = type(f"Guarded{transport.Channel.__name__}", (GuardedChannel, transport.Channel), {})
    return type(f"Guarded{transport.__name__}", (transport,), {"Channel": channel, "__module__": __name__})


def guarded_connection(base: type[Any], refuse: RawRefusal) -> type[Any]:
    """A subclass of the ``kombu.Connection`` class ``base`` whose transport is
    :func:`guarded_transport` of the one ``base`` picks (``get_transport_cls``, the public method
    ``create_transport`` calls: the URL, its SSL default for ``rediss://`` and every other
    parameter are read as before), and whose channels hand what they refuse to ``refuse``."""

    def get_transport_cls(self: Any) -> type[Any]:
        return guarded_transport(base.get_transport_cls(self))

    namespace = {"get_transport_cls": get_transport_cls, "alma_refuse": staticmethod(refuse), "__module__": __name__}
    return type(f"Guarded{base.__name__}", (base,), namespace)
