"""Fixed-delay routines through the Scheduler on simulated time (``{"after": "5s"}``, runs that take
3 s): each next fire is due exactly 5 s after the previous run's END, never two runs at once; a
pause, a resume, ``describe`` and the refusals (docs/architecture.md, "Fixed-delay routines")."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import pytest
from engine_support import SCOPE, T0, every_store, spec

from alma_schedule.errors import BackfillRefused, RegistrationRefused
from alma_schedule.model import RunState

SECOND = timedelta(seconds=1)
ZERO = timedelta(0)


@every_store
def test_each_fire_is_due_its_delay_past_the_previous_runs_end_and_never_overlaps(make, clock, runner, store) -> None:
    runner.on_run = lambda routine, handle: clock.advance(3 * SECOND + timedelta(milliseconds=400))  # a 3.4 s run
    sched = make()
    sched.register(spec("fd", {"after": "5s"}))
    for _ in range(120):  # two simulated minutes, a tick a second
        sched.tick()
        clock.advance(SECOND)
    runs = sorted(store.list_runs(SCOPE, routine_id="fd", limit=1000), key=lambda r: r.fire_at)
    assert len(runs) >= 10 and all(r.state == RunState.COMPLETED for r in runs)
    assert runs[0].fire_at == T0  # the first fire: at registration
    for before, after in pairwise(runs):
        assert before.finished_at is not None and after.started_at is not None
        whole_end = before.finished_at.replace(microsecond=0) + (
            SECOND if before.finished_at.microsecond else 0 * SECOND
        )
        assert after.fire_at == whole_end + 5 * SECOND  # exactly the delay past the end (to the whole second)
        assert after.started_at >= before.finished_at  # never two at once
    assert not any(r.reason == "overlap" for r in runs)


@every_store
def test_a_pause_over_the_fire_restarts_the_delay_at_the_resume(make, clock, store) -> None:
    sched = make()
    sched.register(spec("fd", {"after": "1m"}))
    sched.tick()  # the first fire, at registration; its run ends at once
    first = store.list_runs(SCOPE, routine_id="fd", limit=10)
    assert [r.state for r in first] == [RunState.COMPLETED]
    sched.pause(SCOPE, "fd")
    clock.advance(10 * 60 * SECOND)
    assert sched.tick().claimed == ()
    resumed_at = clock.advance(SECOND)
    sched.resume(SCOPE, "fd")
    row = store.get_routine(SCOPE, "fd")
    assert row is not None and row.next_due_at == resumed_at.replace(microsecond=0) + 60 * SECOND


def test_describe_names_the_wait_for_the_run_and_the_next_fire(make, clock, runner, store) -> None:
    seen: list[str] = []
    sched = make()

    def during(routine, handle) -> None:
        seen.append(str(sched.describe(SCOPE, "fd").to_dict()))

    runner.on_run = during
    sched.register(spec("fd", {"after": "10m"}))
    sched.tick()
    assert seen and "due 10m after its run ends" in seen[0]
    text = str(sched.describe(SCOPE, "fd").to_dict())
    assert "due 10m after the previous run's end" in text


def test_refusals_name_the_field_and_write_nothing(make, clock, store) -> None:
    sched = make()
    for bad, word in (
        ({"after": "0s"}, "'after'"),
        ({"after": "-5m"}, "'after'"),
        ({"after": "400d"}, "'after'"),
        ({"after": "5m", "cron": "* * * * *"}, "more than one"),
        ({"after": "5m", "every": "1m"}, "more than one"),
        ({"after": "5m", "at": "2030-01-01T00:00:00+00:00"}, "more than one"),
        ({"after": "5m", "catch_up": "1h"}, "'catch_up'"),
    ):
        with pytest.raises(RegistrationRefused, match=word):
            sched.register(spec("bad", bad))
    with pytest.raises(RegistrationRefused, match="must be tracked"):
        sched.register(spec("t", {"after": "5m"}, kind="task", task="proj.tasks.x"))
    assert store.get_routine(SCOPE, "bad") is None and store.get_routine(SCOPE, "t") is None


def test_backfill_is_refused(make, clock, store) -> None:
    sched = make()
    sched.register(spec("fd", {"after": "5m"}))
    clock.advance(3600 * SECOND)
    with pytest.raises(BackfillRefused, match="'after'"):
        sched.backfill(SCOPE, "fd", start=T0, end=T0 + 1800 * SECOND)
