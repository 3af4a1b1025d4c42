"""The cyclic garbage collector is paused while a tick claims (engine/collector.py, ``tick_gc_pause``):
off during the claims and sends, back on after, shared by nested and concurrent pausers, never turned
on in a process that turned it off itself, and left alone when the setting is off."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Sequence

import pytest
from engine_support import T0, RecordingDispatcher, every_store, spec

from alma_schedule.engine import collector
from alma_schedule.errors import ConfigurationError
from alma_schedule.model import RunRecord
from alma_schedule.settings import load_settings


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_turns_the_collector_off_inside_and_back_on_after() -> None:
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_turns_it_back_on_even_when_the_body_raises() -> None:
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_nested_pauses_share_one_pause_and_the_outermost_restores() -> None:
    with collector.paused():
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner exit does not turn it on under the outer pause
    assert gc.isenabled()


def test_concurrent_pauses_turn_it_on_only_when_the_last_one_leaves() -> None:
    entered, leave_first, first_left = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with collector.paused():
            entered.set()
            leave_first.wait(10)
        first_left.set()

    t = threading.Thread(target=first)
    t.start()
    assert entered.wait(10)
    with collector.paused():
        leave_first.set()
        assert first_left.wait(10)
        assert not gc.isenabled()  # the other thread left; this pause still holds
    t.join(10)
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_paused_with_the_setting_off_leaves_the_collector_alone() -> None:
    with collector.paused(False):
        assert gc.isenabled()
    gc.disable()
    with collector.paused(False):
        assert not gc.isenabled()


class CollectorWatchingDispatcher(RecordingDispatcher):
    """Records whether the collector was on at each send of claimed runs."""

    def __init__(self) -> None:
        super().__init__()
        self.collector_on: list[bool] = []

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        self.collector_on.append(gc.isenabled())
        super().send_runs(runs)


@every_store
@pytest.mark.parametrize("pause", [True, False])
def test_a_tick_claims_and_sends_with_the_collector_paused_unless_the_setting_is_off(
    make, clock, store, pause: bool
) -> None:
    disp = CollectorWatchingDispatcher()
    sched = make(dispatcher=disp, claim_limit=3, tick_gc_pause=pause)
    for i in range(10):
        sched.register(spec(f"r{i:02d}", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    report = sched.tick()
    assert len(report.claimed) == 10
    assert len(disp.collector_on) >= 4  # 10 fires in batches of 3: every batch sent its claims
    assert disp.collector_on == [not pause] * len(disp.collector_on)
    assert gc.isenabled()


def test_tick_gc_pause_is_read_from_the_environment_and_a_bad_value_is_refused() -> None:
    assert load_settings(environ={}).tick_gc_pause is True
    assert load_settings(environ={"ALMA_TICK_GC_PAUSE": "false"}).tick_gc_pause is False
    with pytest.raises(ConfigurationError, match="ALMA_TICK_GC_PAUSE"):
        load_settings(environ={"ALMA_TICK_GC_PAUSE": "sometimes"})
