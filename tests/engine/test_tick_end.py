"""The end of a tick started before its last sends (alma_schedule/engine/outbox.py): on PostgreSQL,
with a dispatcher that only publishes, the heartbeat's write has run (its row locked, uncommitted)
while the last batch's messages leave; a dispatcher that executes what it is sent keeps the old
order (its sends, then the end of the tick); a held send always leaves before the tick's next store
step."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from engine_support import T0, RecordingDispatcher, every_store, spec

from alma_schedule.model import RunRecord
from tests.stores.sql_support import heartbeat_locked, kill_heartbeat_writer

on_pg = pytest.mark.parametrize("store", [pytest.param("pg", marks=pytest.mark.postgres)], indirect=True)


class Watching(RecordingDispatcher):
    """Records, at each send of runs, whether the heartbeat row was held, and the last tick read."""

    def __init__(self, store: Any, sends_only: bool) -> None:
        super().__init__()
        self.store = store
        self.sends_only = sends_only
        self.locked: list[bool] = []
        self.last_tick: list[Any] = []

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        if getattr(self.store, "dialect", None) == "postgresql":
            self.locked.append(heartbeat_locked(self.store, wait=True))
        self.last_tick.append(self.store.last_tick())
        super().send_runs(runs)


def _two_ticks(make: Any, clock: Any, disp: Watching) -> Any:
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=8))
    sched.tick()  # the heartbeat row exists from here
    clock.set(T0.replace(hour=9))
    return sched.tick()


@on_pg
def test_on_postgresql_the_last_sends_leave_while_the_end_of_the_tick_runs(make, clock, store) -> None:
    disp = Watching(store, sends_only=True)
    report = _two_ticks(make, clock, disp)
    assert len(report.claimed) == 1 and len(disp.runs) == 1
    assert disp.locked == [True]  # the heartbeat's write ran before the send, uncommitted
    assert disp.last_tick == [T0.replace(hour=8)]  # ... and committed after it
    assert store.last_tick() == T0.replace(hour=9) and report.next_wake_at is not None
    assert not heartbeat_locked(store)


@every_store
def test_a_dispatcher_that_executes_what_it_is_sent_gets_its_sends_before_the_end(make, clock, store) -> None:
    disp = Watching(store, sends_only=False)
    report = _two_ticks(make, clock, disp)
    assert len(report.claimed) == 1
    assert disp.locked in ([], [False])  # nothing of the end had started
    assert disp.last_tick == [T0.replace(hour=8)] and store.last_tick() == T0.replace(hour=9)


@every_store
def test_a_held_send_leaves_before_the_ticks_next_store_step(make, clock, store) -> None:
    """The live claims' last batch is held; the tick's next step (here the re-sends, due at once)
    sends it first: the dispatcher sees the claims, then the re-sends' queue-depth question."""
    order: list[str] = []

    class Ordered(RecordingDispatcher):
        def send_runs(self, runs: Sequence[RunRecord]) -> None:
            order.append("runs")
            super().send_runs(runs)

        def run_queue_depth(self) -> int | None:
            order.append("depth")
            return super().run_queue_depth()

    sched = make(dispatcher=Ordered(), resend_first=timedelta(seconds=1))
    sched.register(spec("old", {"cron": "0 8 * * *"}))
    clock.set(T0.replace(hour=8))
    sched.tick()  # old's fire is claimed and sent; its re-send falls due a second later
    sched.register(spec("new", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    order.clear()
    report = sched.tick()
    assert report.claimed and report.resent
    assert order[:2] == ["runs", "depth"]


@on_pg
def test_a_connection_lost_during_the_last_sends_is_a_failed_heartbeat_never_written_twice(make, clock, store) -> None:
    """The pipeline's connection dies while the messages leave: the fires are sent, the heartbeat's
    write (its outcome unknown to the tick) is reported failed and not repeated; the reads are asked
    again on a live connection."""

    class Cutting(RecordingDispatcher):
        def send_runs(self, runs: Sequence[RunRecord]) -> None:
            kill_heartbeat_writer(store)  # the tick's end, started before this send
            super().send_runs(runs)

    disp = Cutting()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    report = sched.tick()
    assert len(report.claimed) == 1 and len(disp.runs) == 1
    failed = [e.error for e in report.errors if e.routine == "<maintenance>"]
    assert len(failed) == 1 and failed[0].startswith("heartbeat: ")
    assert store.last_tick() is None and store.tick_log() == []  # died with its connection, not written again
    assert sched.tick().errors == ()  # the next tick records it, on a live connection
    assert store.last_tick() == T0.replace(hour=9)
