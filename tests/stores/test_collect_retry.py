"""A collector that met the store away (issue 14; found by the chaos suite: a tracked task's run left
``collecting`` with no process to finish it), on a real PostgreSQL store behind a TCP forwarder the
test owns (``tcp_proxy``):

* the collecting CAS (one UPDATE in autocommit mode, its own commit) whose answer is lost: the
  collector reads the row, finds ITS request id as the owner, delivers once and finishes;
* a 2-second outage after the collector won ``collecting``: its finish is retried until the store
  is back (nobody else may ever finish a ``collecting`` run);
* without a sleep nothing is retried (the row stays ``collecting``, as before).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from tcp_proxy import TcpProxy, tcp_proxy

from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.errors import StoreUnavailable
from alma_schedule.model import Routine, RoutineSpec, RunHandle, RunKey, RunResult, Scope
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.stores.base import Store

pytestmark = [pytest.mark.postgres]

SCOPE = Scope("acme", "collect-retry")


class SubmittingRunner:
    """``run`` submits; ``collect`` does ``before_collecting`` to the proxy, takes the collecting CAS,
    does ``after_collecting``, then completes (one delivery recorded per winning collect)."""

    def __init__(self) -> None:
        self.before_collecting: Any = None
        self.after_collecting: Any = None
        self.deliveries: list[RunKey] = []

    def validate(self, routine: Routine) -> None:
        return None

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        now = handle.record.claimed_at
        handle.submit("batch-1", now + timedelta(hours=1), next_poll_at=now)
        return RunResult.submitted()

    def collect(self, routine: Routine, handle: RunHandle) -> RunResult:
        if self.before_collecting is not None:
            self.before_collecting()
        if not handle.begin_collecting():
            return RunResult.submitted()
        self.deliveries.append(handle.key)
        if self.after_collecting is not None:
            self.after_collecting()
        return RunResult.completed("delivered")


@pytest.fixture
def proxy(pg_url: str) -> Iterator[tuple[TcpProxy, str]]:
    migrate_store(pg_url)
    with tcp_proxy(("127.0.0.1", 5432)) as p:
        yield p, p.url(pg_url)


def _submitted(url: str, runner: SubmittingRunner) -> tuple[Scheduler, Store, RunKey]:
    store = open_store(url)
    sched = create_schedule(store=store, runner=runner, settings=Settings(database_url=url))
    now = sched.settings.clock()
    sched.register(
        RoutineSpec(SCOPE.org, SCOPE.uid, "r1", "batch", {"every": "1h"}, {}), now=now - timedelta(hours=1, seconds=1)
    )
    got = store.claim_manual(
        RunKey.of(SCOPE, "r1", "manual:01J0000000000000000000000B"),
        now=now,
        expires_at=now + timedelta(hours=1),
        resend_at=now + timedelta(hours=1),
    )
    assert got.won and got.record is not None
    key = got.record.key
    assert sched.execute(key, owner="run-req").state == "submitted"
    return sched, store, key


class Waits(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        time.sleep(seconds)


def test_a_collecting_cas_whose_answer_is_lost_is_settled_by_the_row(proxy: tuple[TcpProxy, str]) -> None:
    p, url = proxy
    runner = SubmittingRunner()
    sched, store, key = _submitted(url, runner)
    try:
        runner.before_collecting = lambda: p.lose_reply_to(b"UPDATE")
        waits = Waits()
        done = sched.collect(key, owner="collect-req", sleep=waits)
        assert p.commits_lost == 1
        assert runner.deliveries == [key]  # it found itself the owner of `collecting`: delivered once
        assert (done.state, done.reason, done.owner) == ("completed", "delivered", "collect-req")
    finally:
        store.close()


def test_the_collector_that_won_collecting_retries_its_finish(proxy: tuple[TcpProxy, str]) -> None:
    p, url = proxy
    runner = SubmittingRunner()
    sched, store, key = _submitted(url, runner)
    back = threading.Timer(2.0, p.restore)

    def cut() -> None:
        p.cut()
        back.start()

    try:
        runner.after_collecting = cut
        waits = Waits()
        done = sched.collect(key, owner="collect-req", sleep=waits)
        back.join()
        assert waits and (done.state, done.reason) == ("completed", "delivered")
        assert runner.deliveries == [key]
    finally:
        store.close()


def test_without_a_sleep_a_collector_does_not_retry(proxy: tuple[TcpProxy, str]) -> None:
    p, url = proxy
    runner = SubmittingRunner()
    sched, store, key = _submitted(url, runner)
    try:
        runner.after_collecting = p.cut
        with pytest.raises(StoreUnavailable):
            sched.collect(key, owner="collect-req")
        p.restore()
        rec = store.get(key)
        assert rec is not None and (rec.state, rec.owner) == ("collecting", "collect-req")
    finally:
        store.close()
