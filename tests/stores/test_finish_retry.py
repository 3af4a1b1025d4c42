"""The owner of a run retries its own finish while the store is unreachable (issue 14), on a real
PostgreSQL store made unreachable mid-run by a TCP forwarder the test owns (``tcp_proxy``): the
shared server is never touched.

* a 4-second outage starting inside the runner: the finish is retried with the back-off of
  ``policies.finish_retry`` (the sleep injected, here ``time.sleep`` recorded) and the run ends
  as its runner said, once (the streak counted once);
* a commit whose answer never comes back (the connection dies after the server got ``COMMIT``):
  the retry's CAS loses, the row it reads already shows this result: done, the streak counted once;
* an outage that outlasts the soft time limit (a settable clock the injected sleep advances): the
  owner gives up with ``StoreUnavailable`` and the run stays ``running`` (never finished twice);
* without a sleep (not a Celery task) nothing is retried, as before;
* an uncertain outcome (the runner raises ``OutcomeUncertain``) met in an outage: the owner's
  blocked marker is retried like its finish, so ``runs stuck`` lists the run at once, not by age;
* a START whose commit answer never comes back: the would-be owner reads the row, finds itself the
  owner of the ``running`` run, runs it once and finishes it (not stranded ``running`` with no
  process to finish it and no Celery report to block it); a start cut before it reached the
  server finds the row still ``claimed`` and takes it again.
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
from alma_schedule.errors import OutcomeUncertain, StoreUnavailable
from alma_schedule.model import Routine, RoutineSpec, RunHandle, RunKey, RunResult, Scope
from alma_schedule.model.time import SettableTime, system_time
from alma_schedule.policies.finish_retry import CAP
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.stores.base import Store

pytestmark = [pytest.mark.postgres]

SCOPE = Scope("acme", "retry")


class CuttingRunner:
    """Runs, then does ``self.before_return`` to the proxy (cut it, or arm the lost commit)."""

    def __init__(self) -> None:
        self.act: Any = None
        self.runs: list[RunKey] = []
        self.uncertain = False

    def validate(self, routine: Routine) -> None:
        return None

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        self.runs.append(handle.key)
        if self.act is not None:
            self.act()
        if self.uncertain:  # the provider answered; recording it met the outage
            raise OutcomeUncertain("provider answered, its receipt was not recorded") from StoreUnavailable("cut")
        return RunResult.failed("provider_error")


class Recorded:
    """The injected sleep: records each wait, then sleeps (or advances a settable clock)."""

    def __init__(self, clock: SettableTime | None = None) -> None:
        self.waits: list[float] = []
        self.clock = clock

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.clock is not None:
            self.clock.advance(timedelta(seconds=seconds))
        else:
            time.sleep(seconds)


@pytest.fixture
def proxy(pg_url: str) -> Iterator[tuple[TcpProxy, str]]:
    migrate_store(pg_url)
    with tcp_proxy(("127.0.0.1", 5432)) as p:
        yield p, p.url(pg_url)


def _world(url: str, runner: CuttingRunner, **settings: Any) -> tuple[Scheduler, Store]:
    store = open_store(url)
    sched = create_schedule(store=store, runner=runner, settings=Settings(database_url=url, **settings))
    return sched, store


def _claimed(sched: Scheduler, routine_id: str = "r1") -> RunKey:
    now = sched.settings.clock()
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, routine_id, "cut", {"every": "1h"}, {})
    sched.register(spec, now=now - timedelta(hours=1, seconds=1))
    got = sched.store.claim_manual(
        RunKey.of(SCOPE, routine_id, "manual:01J0000000000000000000000A"),
        now=now,
        expires_at=now + timedelta(hours=1),
        resend_at=now + timedelta(hours=1),
    )
    assert got.won and got.record is not None
    return got.record.key


def _outage(p: TcpProxy, back: threading.Timer) -> Any:
    """The runner's act: cut the proxy, and start the timer that restores it."""

    def cut() -> None:
        p.cut()
        back.start()

    return cut


def test_a_four_second_outage_at_the_finish_is_retried_until_the_store_is_back(proxy: tuple[TcpProxy, str]) -> None:
    p, url = proxy
    runner = CuttingRunner()
    sched, store = _world(url, runner)
    try:
        key = _claimed(sched)
        back = threading.Timer(4.0, p.restore)
        runner.act = _outage(p, back)
        sleep = Recorded()
        done = sched.execute(key, owner="req-1", sleep=sleep)
        back.join()
        assert (done.state, done.reason, done.owner) == ("failed", "provider_error", "req-1")
        assert len(sleep.waits) >= 2 and all(0 < w <= CAP for w in sleep.waits)
        assert sched.get(SCOPE, "r1").consecutive_failures == 1
        assert runner.runs == [key]
    finally:
        store.close()


def test_a_commit_whose_answer_is_lost_is_settled_by_reading_the_row(proxy: tuple[TcpProxy, str]) -> None:
    p, url = proxy
    runner = CuttingRunner()
    sched, store = _world(url, runner)
    try:
        key = _claimed(sched)
        runner.act = p.lose_reply_to_commit
        sleep = Recorded()
        done = sched.execute(key, owner="req-2", sleep=sleep)
        assert p.commits_lost == 1 and len(sleep.waits) == 1  # one retry: it found its own commit
        assert (done.state, done.reason) == ("failed", "provider_error")
        assert sched.get(SCOPE, "r1").consecutive_failures == 1  # counted once, by the first commit
    finally:
        store.close()


def test_an_outage_past_the_soft_time_limit_gives_up_and_leaves_the_run_running(
    proxy: tuple[TcpProxy, str],
) -> None:
    p, url = proxy
    clock = SettableTime(system_time())
    runner = CuttingRunner()
    sched, store = _world(url, runner, clock=clock, run_time_limit=timedelta(seconds=10))
    try:
        key = _claimed(sched)
        runner.act = p.cut
        sleep = Recorded(clock)
        with pytest.raises(StoreUnavailable):
            sched.execute(key, owner="req-3", sleep=sleep)
        assert sum(sleep.waits) == pytest.approx(10.0)  # waited exactly up to the soft limit
        p.restore()
        rec = store.get(key)
        assert rec is not None and (rec.state, rec.owner) == ("running", "req-3")
    finally:
        store.close()


def test_without_a_sleep_nothing_is_retried(proxy: tuple[TcpProxy, str]) -> None:
    p, url = proxy
    runner = CuttingRunner()
    sched, store = _world(url, runner)
    try:
        key = _claimed(sched)
        runner.act = p.cut
        with pytest.raises(StoreUnavailable):
            sched.execute(key)
        p.restore()
        rec = store.get(key)
        assert rec is not None and rec.state == "running" and rec.owner is None
    finally:
        store.close()


def test_an_uncertain_outcome_in_an_outage_is_marked_blocked_once_the_store_is_back(
    proxy: tuple[TcpProxy, str],
) -> None:
    p, url = proxy
    runner = CuttingRunner()
    runner.uncertain = True
    sched, store = _world(url, runner)
    try:
        key = _claimed(sched)
        back = threading.Timer(2.0, p.restore)
        runner.act = _outage(p, back)
        sleep = Recorded()
        done = sched.execute(key, owner="req-unsure", sleep=sleep)
        back.join()
        assert sleep.waits and runner.runs == [key]  # the marker waited for the store; the fire ran once
        assert (done.state, done.blocked_why, done.owner) == ("running", "uncertain_outcome", "req-unsure")
        rec = store.get(key)
        assert rec is not None and rec.blocked_at is not None and rec.state == "running"
    finally:
        store.close()


def test_a_loss_report_that_meets_the_store_away_is_applied_once_it_is_back(proxy: tuple[TcpProxy, str]) -> None:
    """Celery's loss report arrives while the store is unreachable (the fault that killed the child
    took it away too): the report is applied again, in a timer thread, once the store is back, so
    the killed run is blocked at once rather than unlisted until it is old."""
    from alma_schedule.model import BlockedWhy
    from alma_schedule.tasks import loss_reports

    p, url = proxy
    sched, store = _world(url, CuttingRunner())
    try:
        key = _claimed(sched)
        assert store.start(key, now=sched.settings.clock(), owner="req-lost").won
        retries = loss_reports.COUNTS["retries"]
        p.cut()
        back = threading.Timer(2.0, p.restore)
        back.start()
        loss_reports.apply_report(sched, "req-lost", BlockedWhy.WORKER_LOST, budget=60)
        assert loss_reports.COUNTS["retries"] > retries  # the first attempt met the store away
        back.join()
        deadline = time.monotonic() + 60
        rec = None
        while time.monotonic() < deadline:
            try:
                rec = store.get(key)
            except StoreUnavailable:
                rec = None
            if rec is not None and rec.blocked_why is not None:
                break
            time.sleep(0.2)
        assert rec is not None and (rec.state, rec.blocked_why, rec.owner) == ("running", "worker_lost", "req-lost")
    finally:
        store.close()


class StartHook:
    """The real store, with ``before_start`` done to the proxy just before each ``start`` (the
    network fault lands on the start's own wire traffic)."""

    def __init__(self, store: Store, before_start: Any) -> None:
        self._store = store
        self.before_start = before_start

    def start(self, *args: Any, **kwargs: Any) -> Any:
        if self.before_start is not None:
            act, self.before_start = self.before_start, None
            act()
        return self._store.start(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_start_whose_commit_answer_is_lost_is_settled_by_reading_the_row(proxy: tuple[TcpProxy, str]) -> None:
    p, url = proxy
    runner = CuttingRunner()
    sched, store = _world(url, runner)
    try:
        key = _claimed(sched)
        # the start CAS is the first UPDATE of execute, in autocommit mode on PostgreSQL: its own commit
        p.lose_reply_to(b"UPDATE")
        sleep = Recorded()
        done = sched.execute(key, owner="req-start", sleep=sleep)
        assert p.commits_lost == 1  # the start reached the server (and committed), its answer did not
        assert runner.runs == [key]  # this request found itself the owner: it ran the fire, once
        assert (done.state, done.reason, done.owner) == ("failed", "provider_error", "req-start")
        assert sched.get(SCOPE, "r1").consecutive_failures == 1
        again = sched.execute(key, owner="req-other", sleep=sleep)  # a re-sent message: the CAS is gone
        assert runner.runs == [key] and again.state == "failed"
    finally:
        store.close()


def test_a_start_cut_before_it_reached_the_server_takes_the_claimed_row_again(proxy: tuple[TcpProxy, str]) -> None:
    p, url = proxy
    runner = CuttingRunner()
    store = open_store(url)
    back = threading.Timer(2.0, p.restore)

    def cut() -> None:
        p.cut()
        back.start()

    hooked = StartHook(store, cut)
    sched = create_schedule(store=hooked, runner=runner, settings=Settings(database_url=url))  # type: ignore[arg-type]
    try:
        key = _claimed(sched)
        sleep = Recorded()
        done = sched.execute(key, owner="req-cut", sleep=sleep)
        back.join()
        assert sleep.waits and runner.runs == [key]
        assert (done.state, done.owner) == ("failed", "req-cut")
    finally:
        store.close()
