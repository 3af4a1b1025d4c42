"""When a clock ticks (issue 44): the pure wake-up policy, a clock's memory of it, and beat's schedule
object that answers from it (no server: the hint reader is a plain function over a list of instants)."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from alma_schedule.policies.wake import WakeRules, decide_wake
from alma_schedule.settings import Settings
from alma_schedule.tasks.beat_schedule import FLOOR_SECONDS, HintSchedule, WokenFor, hint_entry
from alma_schedule.waker import Waker, wait_for_instant

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
S = timedelta(seconds=1)
RULES = WakeRules(period=60 * S, poll=S, min_interval=timedelta(milliseconds=200))


def test_the_first_wake_up_ticks_at_once() -> None:
    wake = decide_wake(T0, None, last_sent_at=None, rules=RULES)
    assert wake.due and wake.woken_for == T0 and wake.reason == "start"


def test_a_hint_that_has_passed_ticks_at_once_for_now() -> None:
    wake = decide_wake(T0 + 5 * S, T0 + 4 * S, last_sent_at=T0, rules=RULES)
    assert wake.due and wake.woken_for == T0 + 5 * S and wake.reason == "hint"


def test_a_hint_ahead_sleeps_until_it_when_it_comes_before_the_poll() -> None:
    wake = decide_wake(T0 + S, T0 + S + timedelta(milliseconds=300), last_sent_at=T0, rules=RULES)
    assert not wake.due and wake.at == T0 + S + timedelta(milliseconds=300)


def test_a_hint_beyond_the_poll_sleeps_one_poll_then_reads_it_again() -> None:
    wake = decide_wake(T0 + S, T0 + 30 * S, last_sent_at=T0, rules=RULES)
    assert not wake.due and wake.at == T0 + 2 * S


def test_a_hint_beyond_the_heartbeat_is_capped_at_it_and_the_heartbeat_ticks() -> None:
    assert decide_wake(T0 + 59.5 * S, T0 + 3600 * S, last_sent_at=T0, rules=RULES).at == T0 + 60 * S
    wake = decide_wake(T0 + 60 * S, T0 + 3600 * S, last_sent_at=T0, rules=RULES)
    assert wake.due and wake.reason == "heartbeat" and wake.woken_for == T0 + 60 * S


def test_no_hint_falls_back_to_the_heartbeat() -> None:
    assert not decide_wake(T0 + 30 * S, None, last_sent_at=T0, rules=RULES).due
    assert decide_wake(T0 + 60 * S, None, last_sent_at=T0, rules=RULES).reason == "heartbeat"


def test_a_burst_costs_one_tick_per_min_interval() -> None:
    just_sent = T0 + 10 * S
    soon = just_sent + timedelta(milliseconds=50)
    wake = decide_wake(soon, soon, last_sent_at=just_sent, rules=RULES)
    assert not wake.due and wake.at == just_sent + timedelta(milliseconds=200)
    later = decide_wake(just_sent + timedelta(milliseconds=200), soon, last_sent_at=just_sent, rules=RULES)
    assert later.due


def test_a_clock_stepped_back_ticks_again_rather_than_sleeping_for_ever() -> None:
    assert decide_wake(T0, None, last_sent_at=T0 + 3600 * S, rules=RULES).due


class Hints:
    """The instants a store would answer ``peek_wake(after)`` with: the earliest strictly after it."""

    def __init__(self, *instants: datetime) -> None:
        self.instants = sorted(instants)
        self.asked: list[datetime] = []
        self.broken = False

    def __call__(self, after: datetime) -> datetime | None:
        self.asked.append(after)
        if self.broken:
            raise ConnectionError("store away")
        return next((at for at in self.instants if at > after), None)


def test_the_waker_asks_for_the_hint_after_the_instant_it_last_ticked_for() -> None:
    hints = Hints(T0 + 3 * S, T0 + 7 * S)
    waker = Waker(RULES, hints)
    first = waker.check(T0)
    assert first.due and hints.asked == []  # nothing to ask before the first tick
    waker.sent(first, T0)
    assert waker.check(T0 + S).at == T0 + 2 * S and hints.asked[-1] == T0
    due = waker.check(T0 + 3 * S)
    assert due.due and due.woken_for == T0 + 3 * S
    waker.sent(due, T0 + 3 * S)
    # the tick for 3 s may still be in flight: the clock does not tick again for it
    assert not waker.check(T0 + 3.5 * S).due and hints.asked[-1] == T0 + 3 * S
    assert waker.check(T0 + 7 * S).due


def test_a_store_that_cannot_answer_costs_the_hint_only_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    hints = Hints(T0 + 3 * S)
    waker = Waker(RULES, hints)
    waker.sent(waker.check(T0), T0)
    hints.broken = True
    with caplog.at_level(logging.WARNING, logger="alma_schedule.clock"):
        assert not waker.check(T0 + 3 * S).due  # the hint is lost: the heartbeat decides
        assert not waker.check(T0 + 4 * S).due
        assert waker.check(T0 + 60 * S).reason == "heartbeat"
        hints.broken = False
        assert waker.check(T0 + 5 * S).due
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "ALMA_TICK_PERIOD" in lines[0] and "readable again" in lines[1]


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def test_beats_schedule_answers_from_the_hint_and_never_less_than_its_floor() -> None:
    clock = Clock(T0)
    hints = Hints(T0 + timedelta(milliseconds=1005))
    sched = HintSchedule(Settings(tick_period=60 * S, clock=clock), hints)
    due, after = sched.is_due(T0)
    assert due and after == pytest.approx(0.2)
    assert sched.is_due(T0).is_due  # beat asks while building its heap without sending: still due
    assert sched.sending() == T0  # beat sends: the tick is for now
    clock.at = T0 + S
    due, wait = sched.is_due(T0)
    assert not due and wait == FLOOR_SECONDS and FLOOR_SECONDS > 0.010  # beat subtracts 10 ms
    clock.at = T0 + timedelta(milliseconds=1005)
    due, _ = sched.is_due(T0)
    assert due and sched.sending() == clock.at
    assert not sched.is_due(T0).is_due
    assert sched.remaining_estimate(T0) >= timedelta(0)


def test_the_entry_carries_woken_for_at_send_time_and_pickles_as_a_plain_schedule() -> None:
    settings = Settings(tick_period=10 * S, clock=Clock(T0))
    entry = hint_entry(settings, None)
    sched, lazy = entry["schedule"], entry["kwargs"]["woken_for"]
    assert isinstance(lazy, WokenFor)
    assert sched.is_due(T0).is_due
    assert lazy() == T0.isoformat()  # what beat's send evaluates
    assert not sched.is_due(T0).is_due  # sent: the next one at the hint or the heartbeat
    assert entry["options"] == {"expires": 9.0, "serializer": "json", "ignore_result": True}
    # beat reads its entries back from its file after each sync: in this process, the live ones
    assert pickle.loads(pickle.dumps(sched)) is sched
    assert pickle.loads(pickle.dumps(entry["kwargs"]))["woken_for"] is lazy


@pytest.mark.integration
def test_the_pickle_names_no_class_of_ours_and_loads_as_a_plain_schedule_without_us() -> None:
    """A fleet that uninstalled or downgraded us: the schedule file still loads (a plain schedule, an
    empty woken_for), in a Python where alma_schedule cannot be imported."""
    entry = hint_entry(Settings(tick_period=10 * S, clock=Clock(T0)), None)
    blob = pickle.dumps({"schedule": entry["schedule"], "kwargs": entry["kwargs"]})
    code = (
        "import pickle, sys; sys.modules['alma_schedule'] = None; "
        f"d = pickle.loads(bytes.fromhex({blob.hex()!r})); "
        "s = d['schedule']; print(type(s).__module__, type(s).__name__, s.run_every, repr(d['kwargs']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["celery.schedules", "schedule", "0:00:10", "{'woken_for':", "''}"]
    assert b"HintSchedule" not in blob and b"WokenFor" not in blob  # only names that resolve without us


class Trailing:
    """A worker's clock that trails the real one by ``lag`` (its host's clock is behind)."""

    def __init__(self, lag: timedelta) -> None:
        self.lag = lag

    def __call__(self) -> datetime:
        return datetime.now(UTC) - self.lag


def test_a_tick_that_arrives_early_waits_once_for_its_instant_then_claims_at_its_own_clock() -> None:
    clock = Trailing(timedelta(milliseconds=300))
    woken_for = datetime.now(UTC)  # the clock's host: 0.3 s ahead of this worker
    at = wait_for_instant(woken_for, clock, timedelta(seconds=2))
    assert at >= woken_for  # never claims before the instant it was woken for


def test_a_tick_from_a_clock_too_far_ahead_claims_at_its_own_clock_at_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Trailing(timedelta(minutes=10))
    woken_for = datetime.now(UTC)
    with caplog.at_level(logging.WARNING, logger="alma_schedule.clock"):
        at = wait_for_instant(woken_for, clock, timedelta(seconds=2))
    assert at < woken_for  # no wait of ten minutes: it claims what is due by its own clock (nothing early)
    (line,) = [r.getMessage() for r in caplog.records]
    assert "ALMA_CLOCK_TOLERANCE" in line
