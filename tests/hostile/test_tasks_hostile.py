"""The Celery tasks' own checks of what a message brings (their bodies are thin over the Scheduler,
which ``test_scheduler_hostile`` covers): ``tick``'s ``now`` (:func:`parse_now`), ``run`` /
``collect``'s key parts (:class:`RunKey`) and ``run_many``'s packed fires (:func:`unpack`), given
hostile values: accepted, or refused with an ``alma_schedule.errors`` type. Issue 14, defect 8.
(A message whose BODY is not a call of our task at all is the poison-message part of the issue.)
And the bytes a guarded Redis channel pops (issue 45, item 1): any bytes are either an envelope
kombu reads (its ``Message``, Redis's ``QoS`` and restore find what they index) or one short reason,
never an exception (``read_envelope``)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import kombu
from hostile_support import T0
from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.compat.kombu import read_envelope
from alma_schedule.errors import AlmaScheduleError
from alma_schedule.model import RunKey
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Settings
from alma_schedule.tasks.batch import unpack
from alma_schedule.tasks.definitions import parse_now
from alma_schedule.testing.hostile import HOSTILE, anything, texts

ISO = st.one_of(
    texts(),
    st.sampled_from(
        [
            "2026-03-02T09:00:00Z",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59.999999-12:00",
            "2026-03-02T09:00:00",
            "2026-02-30T00:00:00Z",
            "1969-12-31T23:59:59Z",
        ]
    ),
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
)
SETTINGS = Settings(clock=SettableTime(T0))


def typed(call: Any) -> Any:
    try:
        return call()
    except AlmaScheduleError:
        return None


@HOSTILE
@given(st.one_of(ISO, anything()))
def test_tick_now(value: Any) -> None:
    at = typed(lambda: parse_now(value, SETTINGS))
    assert at is None or (isinstance(at, datetime) and at <= T0)


@HOSTILE
@given(st.lists(st.one_of(texts(), anything()), min_size=4, max_size=4))
def test_run_and_collect_keys(parts: list[Any]) -> None:
    key = typed(lambda: RunKey(*parts))
    assert key is None or key.args() == parts


@HOSTILE
@given(
    st.one_of(
        st.lists(st.one_of(st.tuples(texts(), texts(), texts(), texts(), ISO).map(list), anything()), max_size=3),
        anything(),
    )
)
def test_run_many_fires(fires: Any) -> None:
    out = typed(lambda: unpack(fires))
    assert out is None or len(out) == len(fires)


# ------------------------------------------------------------------ queue bytes (issue 45, item 1)

#: A channel of kombu's virtual transports (memory: no server), for its body codecs and its Message.
CHANNEL = kombu.Connection("memory://").default_channel
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
TAG = st.one_of(st.uuids().map(str), JSON)
INFO = st.one_of(st.fixed_dictionaries({"exchange": st.text(max_size=8), "routing_key": st.text(max_size=8)}), JSON)
PROPERTIES = st.one_of(
    st.fixed_dictionaries(
        {"delivery_tag": TAG, "delivery_info": INFO},
        optional={"body_encoding": st.one_of(st.just("base64"), JSON), "priority": JSON},
    ),
    JSON,
)
BODY = st.one_of(st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()), JSON)
ENVELOPES = st.fixed_dictionaries(
    {},
    optional={
        "body": BODY,
        "properties": PROPERTIES,
        "headers": st.one_of(st.dictionaries(st.text(max_size=8), JSON, max_size=3), JSON),
        "content-type": st.one_of(st.just("application/json"), JSON),
        "content-encoding": st.one_of(st.just("utf-8"), JSON),
    },
)
WELL_FORMED = st.fixed_dictionaries(
    {
        "body": st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
        "properties": st.fixed_dictionaries(
            {"delivery_tag": st.uuids().map(str), "delivery_info": INFO, "body_encoding": st.just("base64")}
        ),
        "headers": st.dictionaries(st.text(max_size=8), JSON, max_size=3),
        "content-type": st.just("application/json"),
    }
)
QUEUE_BYTES = st.one_of(
    WELL_FORMED.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    JSON.map(lambda v: json.dumps(v).encode()),
    ENVELOPES.map(lambda v: json.dumps(v).encode()),
    ENVELOPES.map(lambda v: json.dumps(v).encode("utf-16")),
)


@HOSTILE
@given(QUEUE_BYTES)
def test_queue_bytes_are_an_envelope_kombu_reads_or_one_reason(raw: bytes) -> None:
    payload, problem = read_envelope(raw, CHANNEL.decode_body)
    if problem is not None:
        assert payload is None and isinstance(problem, str) and 0 < len(problem) <= 200
        return
    message = CHANNEL.Message(payload, channel=CHANNEL)  # what kombu builds from it
    assert message.delivery_tag == payload["properties"]["delivery_tag"]
    info = message.delivery_info
    assert isinstance(info["exchange"], str) and isinstance(info.get("routing_key"), (str, type(None)))
    payload["headers"]["redelivered"] = True  # what a restore of it writes
