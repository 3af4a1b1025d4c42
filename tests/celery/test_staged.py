"""A staged dispatch against the real Redis (:mod:`alma_schedule.tasks.staged`): nothing reaches the
broker until it is sent; sent with the staged runs it is exactly ``send_runs``' dispatch; with other
runs, or discarded, the staged messages never leave and the producer goes back to the pool."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta

import pytest
import redis
from test_dispatcher import SentEvents, messages, record

from alma_schedule.celery import create_app
from alma_schedule.model import RUN_MANY_TASK
from alma_schedule.settings import Settings
from alma_schedule.tasks import CeleryDispatcher
from alma_schedule.tasks.staged import StagedSend

pytestmark = pytest.mark.redis


def _dispatcher(redis_url: str, **kw: object) -> CeleryDispatcher:
    settings = Settings(broker_url=redis_url, **kw)  # type: ignore[arg-type]
    return CeleryDispatcher(create_app(settings), settings)


def _keys(r: redis.Redis) -> list[list[str]]:
    """The run keys of the messages waiting in the run queue (a packed message: each fire's)."""
    out: list[list[str]] = []
    for m in messages(r, "alma.run"):
        args = m["decoded"][0]
        out.extend([f[:4] for f in args[0]] if m["headers"]["task"] == RUN_MANY_TASK else [args])
    return out


def _idle(dispatcher: CeleryDispatcher) -> bool:
    """No producer of the app's pool is checked out (kombu's resource pool: ``_dirty`` holds those)."""
    return not dispatcher.app.producer_pool._dirty


def test_staged_messages_reach_the_broker_only_when_sent(redis_url: str, redis_client: redis.Redis) -> None:
    r = redis_client
    dispatcher = _dispatcher(redis_url, task_events=True, run_batch_size=20)
    runs = [record(i, expires_in=timedelta(seconds=300 - i)) for i in range(45)]
    with SentEvents(dispatcher.app) as events:
        staged = dispatcher.stage_runs(runs)
        assert isinstance(staged, StagedSend) and staged.pending
        assert r.llen("alma.run") == 0 and events.events == []  # built, held in the publish batch
        staged.send(runs)
        from celery_support import wait_for

        wait_for(lambda: len(events.events) >= 3, 15, what="3 task-sent events")
    assert not staged.pending and _idle(dispatcher)
    sent = messages(r, "alma.run")
    assert [m["headers"]["task"] for m in sent] == [RUN_MANY_TASK] * 3  # packed as send_runs packs
    assert _keys(r) == [rec.key.args() for rec in reversed(runs)]  # earliest expiry first
    assert {e["uuid"] for e in events.events} == {m["headers"]["id"] for m in sent}
    staged.send(runs)  # a second send is an ordinary dispatch, never the staged messages again
    assert len(messages(r, "alma.run")) == 6


def test_other_runs_than_the_staged_ones_are_sent_and_the_staged_discarded(
    redis_url: str, redis_client: redis.Redis
) -> None:
    r = redis_client
    dispatcher = _dispatcher(redis_url, run_batch_size=1)
    runs = [record(i) for i in range(10)]
    staged = dispatcher.stage_runs(runs)
    assert staged is not None
    copies = [dataclasses.replace(rec) for rec in runs]  # equal records, not the staged ones
    assert not staged.matches(copies) and not staged.matches(runs[:9]) and staged.matches(runs)
    staged.send(copies[3:])
    assert _keys(r) == [rec.key.args() for rec in runs[3:]]
    assert _idle(dispatcher)


def test_a_discarded_staging_sends_nothing_and_returns_its_producer(redis_url: str, redis_client: redis.Redis) -> None:
    r = redis_client
    dispatcher = _dispatcher(redis_url, task_events=True, run_batch_size=1)
    dispatcher.app.conf.broker_pool_limit = 1  # a producer kept by a staging would starve the next one
    runs = [record(i) for i in range(5)]
    for _ in range(3):
        staged = dispatcher.stage_runs(runs)
        assert staged is not None and not _idle(dispatcher)
        staged.discard()
        staged.discard()  # once only
        assert _idle(dispatcher)
    staged.send(runs)  # after a discard: an ordinary dispatch
    assert r.llen("alma.run") == 5
    assert _keys(r) == [rec.key.args() for rec in runs]


def test_the_memory_transport_stages_nothing(redis_url: str) -> None:
    """Its channel has no publish batch: a publish would leave at once, before the claim's commit."""
    dispatcher = _dispatcher("memory://")
    assert dispatcher.stage_runs([record(0)]) is None
    assert _idle(dispatcher)
    assert _dispatcher(redis_url).stage_runs([]) is None


def test_a_staged_flush_that_fails_is_sent_again_one_message_at_a_time(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """As a dispatch's flush that fails (test_dispatcher): the fires are sent again at once."""
    r = redis_client
    from tests.stores.tcp_proxy import tcp_proxy

    with tcp_proxy(("127.0.0.1", 6379)) as proxy:
        dispatcher = _dispatcher(proxy.url(redis_url), run_batch_size=1)
        runs = [record(i) for i in range(20)]
        staged = dispatcher.stage_runs(runs)
        assert staged is not None and r.llen("alma.run") == 0
        proxy.lose_reply_to(b"LPUSH")
        staged.send(runs)  # no DispatchError
        assert proxy.commits_lost == 1
    assert {tuple(k) for k in _keys(r)} == {tuple(rec.key.args()) for rec in runs}
    assert 20 <= r.llen("alma.run") <= 40


def test_a_staging_is_sent_by_the_thread_that_staged_it(redis_url: str, redis_client: redis.Redis) -> None:
    """kombu's publish batch is per thread: staged and sent on a claim thread, it flushes there."""
    r = redis_client
    dispatcher = _dispatcher(redis_url, run_batch_size=1)
    runs = [record(i) for i in range(4)]
    failures: list[BaseException] = []

    def claim_thread() -> None:
        try:
            staged = dispatcher.stage_runs(runs)
            assert staged is not None
            staged.send(runs)
        except BaseException as exc:
            failures.append(exc)

    t = threading.Thread(target=claim_thread)
    t.start()
    t.join(30)
    assert failures == [] and r.llen("alma.run") == 4
