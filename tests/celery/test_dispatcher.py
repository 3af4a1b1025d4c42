"""CeleryDispatcher against the real Redis: routes, task-sent events, expires, one connection, depth."""

from __future__ import annotations

import base64
import dataclasses
import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery
from celery_support import utcnow, wait_for

from alma_schedule.celery import create_app, install
from alma_schedule.errors import DispatchError
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, RunRecord
from alma_schedule.settings import Settings
from alma_schedule.tasks import CeleryDispatcher
from alma_schedule.tasks.install import our_routes
from alma_schedule.tasks.publisher import argsrepr

pytestmark = pytest.mark.redis


def record(i: int, *, expires_in: timedelta = timedelta(minutes=5), next_poll: Any = None) -> RunRecord:
    now = utcnow().replace(microsecond=0)
    return RunRecord(
        org="acme",
        uid="u1",
        routine_id=f"r{i:04d}",
        run_id="2026-01-01T00:00:00Z",
        state="claimed",
        origin="schedule",
        config_revision="rev",
        fire_at=now,
        claimed_at=now,
        state_at=now,
        expires_at=now + expires_in,
        next_poll_at=next_poll,
    )


def messages(r: redis.Redis, queue: str) -> list[dict[str, Any]]:
    """The raw kombu envelopes waiting in ``queue`` (oldest first), bodies decoded."""
    out = []
    for raw in reversed(r.lrange(queue, 0, -1)):
        env = json.loads(raw)
        body = env["body"]
        if env["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        env["decoded"] = json.loads(body)
        out.append(env)
    return out


class SentEvents:
    """A real event receiver (the way Flower listens) collecting task-sent events in a thread."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self.events: list[dict[str, Any]] = []
        self.messages = 0  # event messages carrying task-sent events (a grouped one: a list)
        self.probed = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._recv: Any = None

    def _on_event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "alma-probe":
            self.probed.set()
        elif event.get("type") == "task-sent":
            self.events.append(event)

    def _run(self) -> None:
        with self.app.connection_for_read() as conn:
            self._recv = self.app.events.Receiver(conn, handlers={"*": self._on_event})
            receive = self._recv._receive

            def counting(body: Any, message: Any) -> None:
                items = body if isinstance(body, list) else [body]
                if any(e.get("type") == "task-sent" for e in items):
                    self.messages += 1
                receive(body, message)

            self._recv._receive = counting  # type: ignore[method-assign]
            self._recv.capture(limit=None, timeout=None, wakeup=False)

    def __enter__(self) -> SentEvents:
        self._thread.start()
        with self.app.connection_for_write() as conn:
            dispatcher = self.app.events.Dispatcher(conn)

            def probe() -> bool:
                dispatcher.send("alma-probe")
                return self.probed.wait(0.2)

            wait_for(probe, 15, 0, "the event receiver to listen")
            dispatcher.close()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._recv is not None:
            self._recv.should_stop = True
        self._thread.join(10)


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The db number of every TCP connection this process opens to Redis from now on (any thread).

    Counted here, not from the server's ``total_connections_received``: that counter is the whole
    server's, and another test run sharing the Redis server would add its connections to ours.
    """
    opened: list[int] = []
    real = redis.connection.Connection._connect

    def counting(self: Any) -> Any:
        sock = real(self)
        opened.append(int(self.db))
        return sock

    monkeypatch.setattr(redis.connection.Connection, "_connect", counting)
    return opened


def test_runs_go_out_routed_with_expires_and_task_sent_events(
    redis_url: str, r: redis.Redis, connects: list[int]
) -> None:
    settings = Settings(broker_url=redis_url, task_events=True, run_batch_size=1)
    app = create_app(settings)
    dispatcher = CeleryDispatcher(app, settings)
    runs = [record(i, expires_in=timedelta(seconds=60 + i)) for i in range(120)]
    with SentEvents(app) as events:
        connects.clear()
        dispatcher.send_runs(runs)
        opened = len(connects)
        wait_for(lambda: len(events.events) >= 120, 15, what="120 task-sent events")

    assert opened <= 2  # one producer connection for the whole batch (plus at most a pool refill)
    sent = messages(r, "alma.run")
    assert len(sent) == 120
    for rec, msg in zip(runs, sent, strict=True):
        headers = msg["headers"]
        assert msg["content-type"] == "application/json"
        assert headers["task"] == RUN_TASK
        assert headers["expires"] == rec.expires_at.isoformat()
        assert msg["decoded"][0] == rec.key.args()
        assert headers["ignore_result"] is True
    ids = {m["headers"]["id"] for m in sent}
    assert len(events.events) == 120  # one event per message, none twice
    assert events.messages == 2  # grouped as Celery's worker groups its task events: 100, then 20
    assert {e["uuid"] for e in events.events} == ids
    assert {e["queue"] for e in events.events} == {"alma.run"}
    assert {e["name"] for e in events.events} == {RUN_TASK}
    assert dispatcher.run_queue_depth() == 120


def test_a_large_dispatch_is_packed_into_run_many_messages_ordered_by_expiry(redis_url: str, r: redis.Redis) -> None:
    settings = Settings(broker_url=redis_url, task_events=True, run_batch_size=20)
    app = create_app(settings)
    dispatcher = CeleryDispatcher(app, settings)
    runs = [record(i, expires_in=timedelta(seconds=300 - i)) for i in range(45)]  # latest first
    dispatcher.send_runs(runs[:20])  # not more than the batch size: single messages
    assert [m["headers"]["task"] for m in messages(r, "alma.run")] == [RUN_TASK] * 20
    r.delete("alma.run")

    dispatcher.send_runs(runs)
    sent = messages(r, "alma.run")
    assert [m["headers"]["task"] for m in sent] == [RUN_MANY_TASK] * 3
    packed = [fire for m in sent for fire in m["decoded"][0][0]]
    assert [f[:4] for f in packed] == [r.key.args() for r in reversed(runs)]  # earliest expiry first
    assert [f[4] for f in packed] == [r.expires_at.isoformat() for r in reversed(runs)]
    for m in sent:  # each message expires with its earliest fire
        assert m["headers"]["expires"] == m["decoded"][0][0][0][4]
    assert [len(m["decoded"][0][0]) for m in sent] == [20, 20, 5]


def test_collects_go_to_the_collect_queue_and_expire_at_the_next_poll(redis_url: str, r: redis.Redis) -> None:
    settings = Settings(broker_url=redis_url)
    app = create_app(settings)
    later = utcnow().replace(microsecond=0) + timedelta(minutes=7)
    CeleryDispatcher(app, settings).send_collects([record(1, next_poll=later), record(2)])
    sent = messages(r, "alma.collect")
    assert [m["headers"]["task"] for m in sent] == [COLLECT_TASK, COLLECT_TASK]
    assert sent[0]["headers"]["expires"] == later.isoformat()
    # no next poll recorded: never sooner than poll_first from now
    floor = utcnow() + settings.poll_first - timedelta(seconds=5)
    assert sent[1]["headers"]["expires"] >= floor.isoformat()
    assert r.llen("alma.run") == 0


def test_a_fleet_route_for_our_task_is_honoured(redis_url: str, r: redis.Redis) -> None:
    app = Celery("fleet", set_as_current=False)
    app.conf.update(broker_url=redis_url, task_routes={RUN_TASK: {"queue": "fleet.alma"}})
    settings = Settings(broker_url="redis://ignored:1/0")  # install never changes the fleet's broker
    install(app, settings=settings)
    CeleryDispatcher(app, settings).send_runs([record(1)])
    assert r.llen("fleet.alma") == 1 and r.llen("alma.run") == 0


def test_run_queue_depth_is_zero_for_a_missing_queue_and_none_when_unknown(redis_url: str) -> None:
    settings = Settings(broker_url=redis_url)
    assert CeleryDispatcher(create_app(settings), settings).run_queue_depth() == 0
    down = Settings(broker_url="redis://127.0.0.1:1/0")
    app = create_app(down)
    app.conf.broker_connection_timeout = 1
    app.conf.broker_connection_max_retries = 0
    assert CeleryDispatcher(app, down).run_queue_depth() is None


def test_a_refusing_broker_is_a_dispatch_error_naming_what_was_sent() -> None:
    down = Settings(broker_url="redis://127.0.0.1:1/0")
    app = create_app(down)
    app.conf.update(broker_connection_timeout=1, task_publish_retry=False)
    with pytest.raises(DispatchError, match="after 0 of 2"):
        CeleryDispatcher(app, down).send_runs([record(1), record(2)])


def test_the_depth_check_reuses_the_pooled_broker_connection(
    redis_url: str, r: redis.Redis, connects: list[int]
) -> None:
    """Tick after tick, the depth is asked on the pooled producer's channel, the one the sends use:
    no connection is opened per check, found or missing queue alike."""
    settings = Settings(broker_url=redis_url, run_batch_size=1)
    dispatcher = CeleryDispatcher(create_app(settings), settings)
    assert dispatcher.run_queue_depth() == 0  # missing queue: NOT_FOUND leaves the channel usable
    dispatcher.send_runs([record(1)])
    r.ping()  # the test's own client connects now, not in the loop
    connects.clear()
    for _ in range(5):
        assert dispatcher.run_queue_depth() == 1
        dispatcher.send_runs([record(2)])
        r.rpop("alma.run")
    r.delete("alma.run")
    assert dispatcher.run_queue_depth() == 0
    assert connects == []


def test_a_publish_batch_whose_flush_fails_is_sent_again_one_message_at_a_time(redis_url: str, r: redis.Redis) -> None:
    """A broker blip at the batch's flush (here: the connection closed right after the pipelined
    LPUSHes reached Redis, before its answers) does not leave the fires for a later tick's re-send:
    they are sent again at once, one message at a time with kombu's publish retry. Some messages may
    now be there twice: a duplicate loses the run's start CAS."""
    from tests.stores.tcp_proxy import tcp_proxy

    runs = [record(i) for i in range(20)]
    for _attempt in range(3):  # a cut that met no LPUSH (the proxy's read missed it) is tried again
        r.delete("alma.run")
        with tcp_proxy(("127.0.0.1", 6379)) as proxy:
            settings = Settings(broker_url=proxy.url(redis_url), run_batch_size=1)
            app = create_app(settings)
            proxy.lose_reply_to(b"LPUSH")
            CeleryDispatcher(app, settings).send_runs(runs)  # no DispatchError
        if proxy.commits_lost:
            break
    assert proxy.commits_lost == 1  # the batch's flush met the cut
    sent = messages(r, "alma.run")
    assert {tuple(m["decoded"][0]) for m in sent} == {tuple(rec.key.args()) for rec in runs}
    assert 20 <= len(sent) <= 40


VOLATILE = {"id", "correlation_id", "root_id", "delivery_tag", "expiration"}


def _scrubbed(env: dict[str, Any]) -> dict[str, Any]:
    """An envelope without what differs from send to send (ids, the TTL computed from now)."""
    headers = {k: v for k, v in env["headers"].items() if k not in VOLATILE}
    props = {k: v for k, v in env["properties"].items() if k not in VOLATILE and k != "delivery_info"}
    return {"headers": headers, "properties": props, "body": env["decoded"], "type": env["content-type"]}


@pytest.mark.parametrize("size", [1, 20])
def test_each_message_is_the_one_celerys_send_task_builds(redis_url: str, r: redis.Redis, size: int) -> None:
    """The dispatcher builds and publishes through ``app.amqp`` with the per-dispatch parts done
    once: its messages are ``app.send_task``'s with the same options, field for field."""
    settings = Settings(broker_url=redis_url, task_events=True, run_batch_size=size)
    app = create_app(settings)
    runs = [record(i, expires_in=timedelta(seconds=120 + i)) for i in range(size + 1)]  # packed when size > 1
    CeleryDispatcher(app, settings).send_runs(runs)
    ours = messages(r, "alma.run")
    r.delete("alma.run")
    for m in ours:
        args = m["decoded"][0]
        expires = m["headers"]["expires"]
        with app.producer_or_acquire() as producer:
            app.send_task(
                m["headers"]["task"], args=args, expires=expires, producer=producer, serializer="json",
                ignore_result=True, add_to_parent=False, argsrepr=argsrepr(args), kwargsrepr="{}",
            )  # fmt: skip
    theirs = messages(r, "alma.run")
    assert len(ours) == len(theirs) == (size + 1 if size == 1 else 2)
    assert [_scrubbed(m) for m in ours] == [_scrubbed(m) for m in theirs]
    for m in ours:  # the TTL (ms): the message's expiry from the moment it was sent
        left = (datetime.fromisoformat(m["headers"]["expires"]) - utcnow()).total_seconds() * 1000
        assert left - 10_000 < int(m["properties"]["expiration"]) <= left + 1000
        assert m["headers"]["root_id"] == m["headers"]["id"]  # no parent task: its own root


def test_publish_signals_fire_for_every_message_batched_or_not(redis_url: str, r: redis.Redis) -> None:
    from celery.signals import after_task_publish, before_task_publish

    seen: list[tuple[str, str, str]] = []

    def before(sender: str, headers: dict[str, Any], routing_key: str, **_: Any) -> None:
        seen.append(("before", sender, headers["id"]))
        assert routing_key == "alma.run"

    def after(sender: str, headers: dict[str, Any], **_: Any) -> None:
        seen.append(("after", sender, headers["id"]))

    before_task_publish.connect(before, weak=False)
    after_task_publish.connect(after, weak=False)
    try:
        for size, count in ((1, 5), (2, 3)):  # 5 fires: 5 run messages; packed 2 a message: 3 run_many
            seen.clear()
            r.delete("alma.run")
            settings = Settings(broker_url=redis_url, run_batch_size=size)
            CeleryDispatcher(create_app(settings), settings).send_runs([record(i) for i in range(5)])
            ids = [m["headers"]["id"] for m in messages(r, "alma.run")]
            assert len(ids) == count
            task = RUN_TASK if size == 1 else RUN_MANY_TASK
            assert seen == [(step, task, i) for i in ids for step in ("before", "after")]
    finally:
        before_task_publish.disconnect(before)
        after_task_publish.disconnect(after)


def test_a_function_router_routes_each_message_by_its_own_arguments(redis_url: str, r: redis.Redis) -> None:
    """A router given as a function may look at the arguments: it is asked per message (a mapping
    of names routes by the task's name alone: asked once per dispatch)."""

    def by_org(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **_: Any) -> Any:
        if name == RUN_TASK and args and args[0] == "vip":
            return {"queue": "alma.vip"}
        return None

    settings = Settings(broker_url=redis_url, run_batch_size=1)
    app = Celery("fleet", set_as_current=False)  # not installed: install would put our own routes first
    app.conf.update(broker_url=redis_url, task_routes=(by_org, our_routes(settings)))
    runs = [record(1), dataclasses.replace(record(2), org="vip"), record(3)]
    CeleryDispatcher(app, settings).send_runs(runs)
    assert [m["decoded"][0][0] for m in messages(r, "alma.vip")] == ["vip"]
    assert [m["decoded"][0][2] for m in messages(r, "alma.run")] == ["r0001", "r0003"]


def _reference_argsrepr(args: list[Any]) -> str:
    text = repr(args)
    return text if len(text) <= 1024 else text[:1021] + "..."


@pytest.mark.parametrize("fires", [0, 1, 5, 6, 7, 8, 20, 200])
@pytest.mark.parametrize("width", [1, 30, 170, 1500])
def test_argsrepr_is_the_cut_repr_whatever_the_size(fires: int, width: int) -> None:
    """The ``argsrepr`` of a ``run_many`` message, written only as far as the bound, is the text the
    whole ``repr`` cut at Celery's bound gives, character for character (around the cut too)."""
    fire = ["2026-06-01T12:00:00Z", "2026-06-01T13:00:00+00:00"]
    packed = [[f"o{i}", "u" * width, f"r{i}", *fire] for i in range(fires)]
    assert argsrepr([packed]) == _reference_argsrepr([packed])
    one = ["org", "u" * width, "r1", "2026-06-01T12:00:00Z"]
    assert argsrepr(one) == _reference_argsrepr(one)


def test_a_packed_fire_carries_its_own_expiry_text_whatever_its_zone() -> None:
    """The expiry texts of a dispatch are written once per UTC instant; the same instant in another
    zone keeps its own text (equal datetimes, different ``isoformat``)."""
    from datetime import UTC, timezone

    from alma_schedule.tasks.dispatcher import _iso

    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    texts: dict[datetime, str] = {}
    assert _iso(texts, at) == "2026-03-01T12:00:00+00:00"
    shifted = at.astimezone(timezone(timedelta(hours=2)))
    assert shifted == at
    assert _iso(texts, shifted) == "2026-03-01T14:00:00+02:00"
    assert _iso(texts, at) == "2026-03-01T12:00:00+00:00"
