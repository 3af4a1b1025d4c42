"""Issue 50, part 3: the retention of run history (``run_retention``) on simulated time. Over days of
every-minute fires the tick's maintenance keeps the ledger at its bound (the runs of the last
``run_retention``, plus what ``PRUNE_EVERY`` and ``claim_limit`` let accumulate), never deletes a
live run, never more than ``claim_limit`` rows a tick, and raises ``pruned_through`` so a pruned fire
is never backfilled. The store contract (``RetentionContract``) holds each store to ``prune_runs``."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from engine_support import DAY, MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.engine.retention import PRUNE_EVERY
from alma_schedule.errors import BackfillRefused, ConfigurationError
from alma_schedule.model import RunState
from alma_schedule.settings import Settings, load_settings

EVERY_MINUTE = ("a", "b", "c")
LIMIT = 5  # claim_limit: below the fires of one PRUNE_EVERY, so a tick's batch is bounded by it


def _fleet(sched) -> None:
    for rid in EVERY_MINUTE:
        sched.register(spec(rid, {"every": "1m"}))
    # a submitted job that never ends: its run stays open for days, its later fires skipped(overlap)
    sched.register(spec("live", {"every": "1m"}, behave="submit", polls=10**9, deadline_s=30 * 86400))


def _ledger(store) -> list:
    return store.list_runs(SCOPE, limit=1_000_000)


def _run_minutes(sched, clock, start: int, minutes: int, pruned: list[int], step: int = 1) -> None:
    """A tick every ``step`` minutes of ``[start, start + minutes)`` (minutes after ``T0``)."""
    for m in range(start, start + minutes, step):
        clock.set(T0 + m * MINUTE)
        report = sched.tick()
        assert report.runs_pruned <= LIMIT, (m, report.runs_pruned)
        assert report.to_dict()["runs_pruned"] == report.runs_pruned
        assert not report.errors, report.errors
        pruned.append(report.runs_pruned)


def _bound() -> int:
    """The ledger's bound: one day of the four routines' fires (retention 1d), plus what may wait
    for the prune: a PRUNE_EVERY of fires and a backlog the LIMIT-row batches work off."""
    per_minute = len(EVERY_MINUTE) + 1
    return per_minute * 1440 + per_minute * int(PRUNE_EVERY / MINUTE) * 2 + LIMIT


def _stale(store, now) -> list:
    """Terminal runs past the bound: ended more than the retention and the prune's slack ago."""
    return [r for r in _ledger(store) if r.terminal and r.finished_at < now - DAY - 2 * PRUNE_EVERY]


def _check_days(make, clock, store, minutes: int, *, first_day_step: int = 1) -> None:
    """A day of fires (a tick every minute for its first 130 minutes, then every ``first_day_step``
    minutes), then ``minutes`` of every-minute fires past the retention (the first 130 minutes' rows
    age out at every tick of the first two hours), the ledger checked every hour of them."""
    sched = make(run_retention=DAY, claim_limit=LIMIT)
    _fleet(sched)
    pruned: list[int] = []
    _run_minutes(sched, clock, 0, 130, pruned)
    _run_minutes(sched, clock, 130, 1320, pruned, first_day_step)
    live = [r for r in _ledger(store) if r.routine_id == "live" and r.state == RunState.SUBMITTED]
    assert len(live) == 1 and live[0].fire_at <= T0 + 10 * MINUTE  # soon older than the retention
    sizes = []
    for hour in range(0, minutes, 60):
        _run_minutes(sched, clock, 1450 + hour, min(60, minutes - hour), pruned)
        sizes.append(len(_ledger(store)))
        assert _stale(store, clock()) == []
    # the live run is never deleted, however old; nothing open ever goes
    assert store.get(live[0].key) is not None and store.get(live[0].key).state == RunState.SUBMITTED
    assert all(size <= _bound() for size in sizes), (sizes, _bound())
    assert max(pruned) == LIMIT and sum(pruned) > (minutes - 10) * len(EVERY_MINUTE)  # bounded, and pruning
    # backfill never re-runs a pruned fire: pruned_through rose with the deletes
    now = clock()
    through = sched.get(SCOPE, "a").pruned_through
    assert through is not None and now - DAY - 2 * PRUNE_EVERY <= through < now - DAY
    with pytest.raises(BackfillRefused) as refused:
        sched.backfill(SCOPE, "a", T0 + MINUTE, through)
    assert refused.value.reason == "pruned_through"


def test_days_of_every_minute_fires_keep_the_ledger_at_its_bound(make, clock, store) -> None:
    _check_days(make, clock, store, 1440)  # two days of every-minute fires, the second one pruning


@every_store
def test_every_minute_fires_past_the_retention_keep_the_ledger_at_its_bound_on_every_store(make, clock, store) -> None:
    _check_days(make, clock, store, 2 * 60, first_day_step=10)  # most of the first day's fires collapse


def test_off_by_default_nothing_is_pruned(make, clock, store) -> None:
    sched = make()
    assert sched.settings.run_retention is None
    sched.register(spec("a", {"every": "1m"}))
    claimed = 0
    for m in range(0, 3 * 1440, 60):  # hourly ticks over three days: a fire an hour (the rest collapse)
        clock.set(T0 + m * MINUTE)
        report = sched.tick()
        assert report.runs_pruned == 0
        claimed += len(report.claimed)
    assert claimed > 70 and len(_ledger(store)) == claimed and sched.get(SCOPE, "a").pruned_through is None


def test_the_prune_runs_only_every_prune_every_unless_the_last_batch_was_full(make, clock, store) -> None:
    sched = make(run_retention=DAY, claim_limit=2, dispatcher=RecordingDispatcher())
    calls: list[int] = []
    real = store.prune_runs

    def counting(before, limit):
        calls.append(limit)
        return real(before, limit)

    store.prune_runs = counting  # type: ignore[method-assign]
    clock.set(T0)
    sched.tick()
    assert calls == [2]  # the first tick of a process prunes
    clock.set(T0 + timedelta(minutes=1))
    sched.tick()
    assert calls == [2]  # nothing was due, and PRUNE_EVERY has not passed
    clock.set(T0 + PRUNE_EVERY)
    sched.tick()
    assert calls == [2, 2]


def test_a_failing_prune_is_reported_never_raised(make, clock, store, caplog) -> None:
    sched = make(run_retention=DAY)

    def broken(before, limit):
        raise RuntimeError("disk full")

    store.prune_runs = broken  # type: ignore[method-assign]
    clock.set(T0)
    with caplog.at_level(logging.ERROR, logger="alma_schedule.engine"):
        report = sched.tick()
    assert report.runs_pruned == 0
    assert [(e.routine, e.error) for e in report.errors] == [("<maintenance>", "prune_runs: RuntimeError")]
    assert "tick maintenance prune_runs failed" in caplog.text


@pytest.mark.parametrize("value", ["23h", "1h30m", "0", "-1d", "86399"])
def test_a_retention_shorter_than_a_day_is_refused_in_one_line_naming_it(value: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        load_settings(environ={"ALMA_RUN_RETENTION": value})
    message = str(refused.value)
    assert "ALMA_RUN_RETENTION" in message and "\n" not in message
    with pytest.raises(ConfigurationError):
        load_settings(conf={"alma_run_retention": value})


def test_a_retention_is_read_from_the_environment_and_the_app() -> None:
    assert load_settings(environ={"ALMA_RUN_RETENTION": "90d"}).run_retention == timedelta(days=90)
    assert load_settings(conf={"alma_run_retention": "1d"}).run_retention == DAY
    assert load_settings(environ={}).run_retention is None
    with pytest.raises(ConfigurationError, match="ALMA_RUN_RETENTION"):
        Settings(run_retention=timedelta(hours=1))
