"""Issue 50, part 2: the retention of the audit trail (``event_retention``) on simulated time. Off by
default (nothing pruned); on, the tick's maintenance deletes the events older than it, oldest first,
never more than ``claim_limit`` a tick; a retention under a day is a one-line refusal naming
``ALMA_EVENT_RETENTION``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from engine_support import DAY, HOUR, MINUTE, SCOPE, T0, every_store, spec

from alma_schedule.errors import ConfigurationError
from alma_schedule.settings import Settings, load_settings

LIMIT = 3


def _churn(sched, clock, hours: int) -> None:
    """A pause and a resume by an operator every hour (two events an hour)."""
    for h in range(hours):
        clock.set(T0 + h * HOUR)
        sched.pause(SCOPE, "r1", f"p{h}", actor="ops@host")
        sched.resume(SCOPE, "r1", actor="ops@host")


def test_off_by_default_nothing_is_pruned(make, clock, store) -> None:
    sched = make()
    assert sched.settings.event_retention is None
    sched.register(spec("r1", {"every": "1h"}), actor="ops@host")
    _churn(sched, clock, 30)
    clock.set(T0 + 40 * DAY)
    assert not sched.tick().errors
    assert len(sched.history(SCOPE, "r1", limit=1000)) == 61


@every_store
def test_the_tick_prunes_old_events_in_bounded_batches(make, clock, store) -> None:
    sched = make(event_retention=DAY, claim_limit=LIMIT)
    sched.register(spec("r1", {"every": "1h"}), actor="ops@host")
    _churn(sched, clock, 6)  # 13 events, the last at T0 + 5h
    calls: list[int] = []
    real = store.prune_events

    def counting(before, limit):
        calls.append(limit)
        return real(before, limit)

    store.prune_events = counting  # type: ignore[method-assign]
    counts = []
    for m in range(0, 8 * 60, 60):  # hourly ticks from T0 + 1d + 1m: the oldest age out one by one
        clock.set(T0 + DAY + MINUTE + m * MINUTE)
        before = len(sched.history(SCOPE, "r1", limit=1000))
        assert not sched.tick().errors
        after = sched.history(SCOPE, "r1", limit=1000)
        counts.append(before - len(after))
        assert all(e.at >= clock() - DAY for e in after)  # nothing older than the retention is left
    assert max(counts) <= LIMIT and sum(counts) == 13 and set(calls) == {LIMIT}
    assert sched.history(SCOPE, "r1") == []  # rows of every kind go: the registration's too


def test_a_retention_under_a_day_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="ALMA_EVENT_RETENTION") as refused:
        Settings(event_retention=timedelta(hours=23))
    assert "\n" not in str(refused.value)
    with pytest.raises(ConfigurationError, match="ALMA_EVENT_RETENTION"):
        load_settings(environ={"ALMA_EVENT_RETENTION": "1h"})
    assert load_settings(environ={"ALMA_EVENT_RETENTION": "90d"}).event_retention == timedelta(days=90)
    assert load_settings(environ={}).event_retention is None
