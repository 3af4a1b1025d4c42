"""Contract: every collapsed fire is counted, ``routines.fires_missed``.
docs/architecture.md, section "The modules, in detail" (testing/contract_missed.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from alma_schedule.engine.decide import decide
from alma_schedule.model import Decision, Fire, Routine, RunKey, RunState
from alma_schedule.policies.missed import CAP, shown
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import HOUR, MINUTE, SCOPE, SECOND, T0, TIMERS, fire_id, make_routine, register

SETTINGS = Settings()
EVERY_MINUTE: Mapping[str, Any] = {"every": 60}  # anchored on REGISTERED (11:00): fires on the minute


def at(now: datetime) -> Callable[[Routine], Decision]:
    """The engine's ``decide`` bound to ``now``."""
    return lambda routine: decide(routine, now, SETTINGS)


def _row(store: Store, routine_id: str = "r1") -> Routine:
    row = store.get_routine(SCOPE, routine_id)
    assert row is not None
    return row


def _down(store: Store, routine_id: str = "r1", *, since: datetime, **kw: Any) -> Routine:
    """A routine whose last claim was the fire at ``since`` (its next fire one minute later)."""
    schedule = kw.pop("schedule", EVERY_MINUTE)
    return register(store, routine_id, schedule=schedule, last_fire=since, next_due_at=since + MINUTE, **kw)


class MissedContract:
    def test_a_claim_after_downtime_counts_the_fires_it_collapsed(self, store: Store) -> None:
        _down(store, since=T0 - 10 * MINUTE)  # down for 10 minutes: 9 fires between the cursor and T0
        batch = store.claim_due(T0, 100, at(T0), TIMERS)
        [rec] = batch.claimed
        assert rec.run_id == fire_id(T0), "only the latest fire runs (guarantee 3)"
        assert batch.fires_missed == (("test", 9),)
        row = _row(store)
        assert (row.fires_missed, row.fires_missed_capped, row.last_fire) == (9, False, T0)
        for minute in range(1, 10):  # the collapsed fires have no row: counted, never claimed
            assert store.get(RunKey.of(SCOPE, "r1", fire_id(T0 - minute * MINUTE))) is None
        later = T0 + 5 * MINUTE  # down again: 4 more
        assert store.claim_due(later, 100, at(later), TIMERS).fires_missed == (("test", 4),)
        assert (_row(store).fires_missed, _row(store).fires_missed_capped) == (13, False)

    def test_a_steady_claim_counts_nothing(self, store: Store) -> None:
        _down(store, since=T0 - MINUTE)
        batch = store.claim_due(T0, 100, at(T0), TIMERS)
        assert len(batch.claimed) == 1 and batch.fires_missed == ()
        assert (_row(store).fires_missed, _row(store).fires_missed_capped) == (0, False)

    def test_a_first_claim_counts_from_the_registration(self, store: Store) -> None:
        # registered at T0 - 5 min with no cursor: its fires T0 - 4 .. T0 - 1 min collapse into T0's
        register(store, schedule=EVERY_MINUTE, registered_at=T0 - 5 * MINUTE, next_due_at=T0 - 4 * MINUTE)
        assert store.claim_due(T0, 100, at(T0), TIMERS).fires_missed == (("test", 4),)
        assert _row(store).fires_missed == 4

    def test_the_fire_a_claim_records_skipped_missed_has_a_row_and_is_not_counted(self, store: Store) -> None:
        # catch_up 30 s: T0's window closed at T0 + 30 s; a tick at T0 + 40 s records it skipped(missed)
        _down(store, since=T0 - 10 * MINUTE, schedule={"every": 60, "catch_up": "30s"})
        now = T0 + 40 * SECOND
        batch = store.claim_due(now, 100, at(now), TIMERS)
        assert batch.claimed == () and [(r.run_id, r.state, r.reason) for r in batch.skipped] == [
            (fire_id(T0), RunState.SKIPPED, "missed")
        ]
        assert batch.fires_missed == (("test", 9),) and _row(store).fires_missed == 9

    def test_fires_while_paused_are_not_counted_when_resumed(self, store: Store) -> None:
        _down(store, since=T0 - MINUTE)
        store.claim_due(T0, 100, at(T0), TIMERS)
        store.set_paused(SCOPE, "r1", "operator", now=T0 + 30 * SECOND, next_due_at=None)
        t1 = T0 + 30 * MINUTE + 10 * SECOND  # resumed: the cursor restarts at t1, the next fire T0 + 31 min
        store.set_paused(SCOPE, "r1", None, now=t1, next_due_at=T0 + 31 * MINUTE)
        now = T0 + 31 * MINUTE
        batch = store.claim_due(now, 100, at(now), TIMERS)
        assert [r.run_id for r in batch.claimed] == [fire_id(now)] and batch.fires_missed == ()
        assert _row(store).fires_missed == 0, "the 30 fires while paused were not due"
        later = T0 + 34 * MINUTE  # collapsed after the resume: counted
        assert store.claim_due(later, 100, at(later), TIMERS).fires_missed == (("test", 2),)

    def test_fires_while_disabled_are_not_counted_when_enabled(self, store: Store) -> None:
        _down(store, since=T0 - MINUTE)
        store.claim_due(T0, 100, at(T0), TIMERS)
        store.set_enabled(SCOPE, "r1", False, now=T0 + 30 * SECOND, next_due_at=None)
        t1 = T0 + 2 * HOUR + 10 * SECOND
        store.set_enabled(SCOPE, "r1", True, now=t1, next_due_at=T0 + 2 * HOUR + MINUTE)
        now = T0 + 2 * HOUR + MINUTE
        assert store.claim_due(now, 100, at(now), TIMERS).fires_missed == ()
        assert _row(store).fires_missed == 0

    def test_fires_before_a_schedule_change_are_not_counted(self, store: Store) -> None:
        old = _down(store, since=T0 - MINUTE)
        store.claim_due(T0, 100, at(T0), TIMERS)
        t1 = T0 + HOUR + 10 * SECOND  # every 2 minutes from t1 on: registration restarts the cursor at t1
        anchor, first = T0 + HOUR, T0 + HOUR + 2 * MINUTE
        changed = make_routine(schedule={"every": 120}, registered_at=anchor, last_fire=t1, next_due_at=first)
        store.put_routine(changed, now=t1, expected_revision=old.config_revision)
        now = T0 + HOUR + 2 * MINUTE
        batch = store.claim_due(now, 100, at(now), TIMERS)
        assert [r.run_id for r in batch.claimed] == [fire_id(now)] and batch.fires_missed == ()
        assert _row(store).fires_missed == 0, "the hour of the old schedule was not due under the new one"

    def test_fires_outside_the_bounds_are_not_counted(self, store: Store) -> None:
        start = (T0 - 3 * MINUTE).isoformat()
        _down(store, "early", since=T0 - 10 * MINUTE, schedule={"every": 60, "not_before": start})
        end = (T0 - 5 * MINUTE).isoformat()  # its last fire in the bounds, T0 - 5 min, is past its window
        _down(store, "late", since=T0 - 10 * MINUTE, schedule={"every": 60, "not_after": end})
        batch = store.claim_due(T0, 100, at(T0), TIMERS)
        assert {r.routine_id: r.run_id for r in batch.claimed} == {"early": fire_id(T0)}
        assert [(r.routine_id, r.run_id, r.reason) for r in batch.skipped] == [
            ("late", fire_id(T0 - 5 * MINUTE), "missed")
        ]
        assert _row(store, "early").fires_missed == 3, "T0 - 3 .. T0 - 1 min: not_before is inclusive"
        assert _row(store, "late").fires_missed == 4, "T0 - 9 .. T0 - 6 min: the later ones were past not_after"
        assert batch.fires_missed == (("test", 7),)

    def test_fires_beyond_max_runs_are_not_counted(self, store: Store) -> None:
        _down(store, since=T0 - 10 * MINUTE, schedule={"every": 60, "max_runs": 3})
        assert store.claim_due(T0, 100, at(T0), TIMERS).fires_missed == (("test", 2),)
        row = _row(store)
        assert (row.fires_missed, row.schedule_claims) == (2, 1), "claimed + counted never exceed max_runs"

    def test_a_claim_counts_at_most_the_cap_and_latches_the_flag(self, store: Store) -> None:
        _down(store, since=T0 - HOUR, schedule={"every": 1})  # 3,599 fires a second: counted 3,599
        since = T0 - 30 * 24 * HOUR  # a minutely routine down for a month: 43,199 fires
        _down(store, "month", since=since, registered_at=since - HOUR)
        batch = store.claim_due(T0, 100, at(T0), TIMERS)
        assert batch.fires_missed == (("test", 3_599 + CAP),)
        assert (_row(store).fires_missed, _row(store).fires_missed_capped) == (3_599, False)
        month = _row(store, "month")
        assert (month.fires_missed, month.fires_missed_capped) == (CAP, True)
        assert shown(month.fires_missed, month.fires_missed_capped) == "10,000+"
        later = T0 + 5 * MINUTE
        store.claim_due(later, 100, at(later), TIMERS)
        month = _row(store, "month")
        assert (month.fires_missed, month.fires_missed_capped) == (CAP + 4, True), "the flag stays"
        assert shown(month.fires_missed, month.fires_missed_capped) == "10,004+"

    def test_the_counts_are_reported_by_kind(self, store: Store) -> None:
        _down(store, "a", since=T0 - 10 * MINUTE)
        _down(store, "b", since=T0 - 5 * MINUTE, kind="other")
        _down(store, "c", since=T0 - 3 * MINUTE, kind="other")
        _down(store, "d", since=T0 - MINUTE)
        assert store.claim_due(T0, 100, at(T0), TIMERS).fires_missed == (("other", 6), ("test", 9))

    def test_a_new_incarnation_starts_at_zero_and_a_kept_row_keeps_its_count(self, store: Store) -> None:
        # catch_up 30 s: the claim at T0 + 40 s records T0 skipped(missed) (no open run: it can be deleted)
        routine = _down(store, since=T0 - 10 * MINUTE, schedule={"every": 60, "catch_up": "30s"})
        store.claim_due(T0 + 40 * SECOND, 100, at(T0 + 40 * SECOND), TIMERS)
        kept = store.put_routine(
            dataclasses.replace(routine, definition={"text": "changed"}, fires_missed=0, config_revision="rev-2"),
            now=T0 + MINUTE,
            expected_revision=routine.config_revision,
        )
        assert (kept.fires_missed, kept.fires_missed_capped) == (9, False), "only a claim writes the count"
        store.delete_routine(SCOPE, "r1", now=T0 + 2 * MINUTE)
        fresh = store.put_routine(dataclasses.replace(routine, fires_missed=7, fires_missed_capped=True), now=T0 + HOUR)
        assert (fresh.fires_missed, fresh.fires_missed_capped) == (0, False)

    def test_a_bad_count_defers_the_routine_and_writes_nothing_else(self, store: Store) -> None:
        for i, bad in enumerate((-1, CAP + 1, True, 2.0, "3", None)):
            routine = _down(store, f"r{i}", since=T0 - 10 * MINUTE)

            def decide_bad(r: Routine, bad: Any = bad) -> Decision:
                fire = decide(r, T0, SETTINGS)
                assert isinstance(fire, Fire)
                return dataclasses.replace(fire, fires_missed=bad)

            batch = store.claim_due(T0, 100, decide_bad, TIMERS)
            assert batch.claimed == () and [d.routine_id for d in batch.deferred] == [f"r{i}"], bad
            row = _row(store, f"r{i}")
            assert (row.fires_missed, row.last_fire, row.error_count) == (0, routine.last_fire, 1), bad
