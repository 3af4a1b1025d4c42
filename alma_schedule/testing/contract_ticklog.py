"""Contract: the tick log: one row per minute, merged by each tick of it, pruned after
``TICK_LOG_KEEP_DAYS``, read newest first; and ``record_tick``, the end of a tick: the heartbeat and
the tick's minute in one step; and ``begin_tick_end``, which may obtain the end of a tick early."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Defer, NotDue, Routine, TickEndAsk, TickMinute
from alma_schedule.model.tick import TICK_LOG_PRUNE_LIMIT
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import HOUR, MINUTE, SCOPE, T0, TIMERS, register, running


def end_of_tick_world(store: Store) -> None:
    """Something for every part of the end of a tick at ``T0``: a routine that cannot be planned
    (``bad``), a run running since ``T0 - 3h`` (``slow``: blocked past ``2 * run_time_limit`` of an
    hour) and a fire ten minutes ahead (``later``: the wake-up hint)."""

    def bad(routine: Routine) -> Defer | NotDue:
        return Defer(T0 + HOUR, "bad") if routine.routine_id == "bad" else NotDue(T0 + 5 * HOUR)

    register(store, "slow", next_due_at=T0 - 3 * HOUR)
    running(store, "slow", now=T0 - 3 * HOUR)
    register(store, "bad", next_due_at=T0 - HOUR)
    store.claim_due(T0 - HOUR, 10, bad, TIMERS)
    register(store, "later", next_due_at=T0 + 10 * MINUTE)


class TickLogContract:
    def test_routines_are_counted_by_state_up_to_the_cap(self, store: Store) -> None:
        assert store.count_routines() == {"enabled": 0, "paused": 0, "disabled": 0}
        for n in range(3):
            register(store, f"on{n}")
        register(store, "held")
        register(store, "off")
        register(store, "gone")
        register(store, "off-and-held")
        store.set_paused(SCOPE, "held", "maintenance", now=T0, next_due_at=None)
        store.set_enabled(SCOPE, "off", False, now=T0, next_due_at=None)
        store.set_enabled(SCOPE, "off-and-held", False, now=T0, next_due_at=None)
        store.set_paused(SCOPE, "off-and-held", "x", now=T0, next_due_at=None)
        store.delete_routine(SCOPE, "gone", now=T0)
        assert store.count_routines() == {"enabled": 3, "paused": 1, "disabled": 2}
        assert store.count_routines(cap=1) == {"enabled": 2, "paused": 1, "disabled": 2}  # stops at cap + 1

    def test_ticks_of_one_minute_merge_into_its_row(self, store: Store) -> None:
        assert store.tick_log() == []
        store.log_tick(T0 + timedelta(seconds=1), 3, 0.5, 2.0)
        store.log_tick(T0 + timedelta(seconds=40), 0, None, None)
        store.log_tick(T0 + timedelta(seconds=59), 2, 1.5, 1.0)
        assert store.tick_log() == [TickMinute(T0, 3, 5, 1.5, 2.0)]

    def test_the_log_is_newest_first_limited_and_pruned_after_seven_days(self, store: Store) -> None:
        for n in range(5):
            store.log_tick(T0 + timedelta(minutes=n), n, None, float(n))
        got = store.tick_log(limit=3)
        assert [m.minute for m in got] == [T0 + timedelta(minutes=n) for n in (4, 3, 2)]
        assert got[0] == TickMinute(T0 + timedelta(minutes=4), 1, 4, None, 4.0)
        later = T0 + timedelta(days=7, minutes=2, seconds=30)  # minutes 0 and 1 are older than 7 days
        store.log_tick(later, 1, 0.25, 0.75)
        minutes = [m.minute for m in store.tick_log(limit=100)]
        assert minutes == [later.replace(second=0), *(T0 + timedelta(minutes=n) for n in (4, 3, 2))]

    @pytest.mark.parametrize("end", ["log_tick", "record_tick"])
    def test_a_tick_prunes_at_most_its_limit_of_old_minutes_the_oldest_first(self, store: Store, end: str) -> None:
        for n in range(TICK_LOG_PRUNE_LIMIT + 5):  # a log whose clock stood still for 8 days
            store.log_tick(T0 + timedelta(minutes=n), 0, None, None)
        later = T0 + timedelta(days=8, minutes=TICK_LOG_PRUNE_LIMIT + 5)
        getattr(store, end)(later, 0, None, None)  # the 1,000 oldest go
        left = [m.minute for m in store.tick_log(limit=TICK_LOG_PRUNE_LIMIT + 10)]
        kept = reversed(range(TICK_LOG_PRUNE_LIMIT, TICK_LOG_PRUNE_LIMIT + 5))  # the 5 newest old minutes
        assert left == [later, *(T0 + timedelta(minutes=n) for n in kept)]
        getattr(store, end)(later, 0, None, None)
        assert [m.minute for m in store.tick_log()] == [later]

    def test_record_tick_is_the_heartbeat_and_the_minute_of_the_tick_log(self, store: Store) -> None:
        register(store, "later", next_due_at=T0 + 10 * MINUTE)
        assert store.record_tick(T0 + timedelta(seconds=5), 3, 0.5, 2.0) == T0 + 10 * MINUTE  # the hint
        assert store.last_tick() == T0 + timedelta(seconds=5)
        assert store.next_wake_at() == T0 + 10 * MINUTE
        assert store.record_tick(T0 + timedelta(seconds=50), 1, 1.0, None) == T0 + 10 * MINUTE
        assert store.tick_log() == [TickMinute(T0, 2, 4, 1.0, 2.0)]  # merged as log_tick merges
        # as heartbeat: an older tick keeps the last tick, stores its own hint; logs into its own minute
        assert store.record_tick(T0 - MINUTE, 0, None, None) == T0 + 10 * MINUTE
        assert store.last_tick() == T0 + timedelta(seconds=50)
        assert store.tick_log() == [TickMinute(T0, 2, 4, 1.0, 2.0), TickMinute(T0 - MINUTE, 1, 0, None, None)]
        later = T0 + timedelta(days=7, minutes=1)  # both older minutes pruned, as log_tick prunes
        assert store.record_tick(later, 0, None, None) is None
        assert [m.minute for m in store.tick_log()] == [later]

    def test_a_refused_record_tick_writes_neither_the_heartbeat_nor_the_log(self, store: Store) -> None:
        for now, claimed, lag in ((T0.replace(tzinfo=None), 1, 0.5), (T0, -1, 0.5), (T0, 1, float("nan"))):
            with pytest.raises(InvalidInput):
                store.record_tick(now, claimed, lag, None)
        assert store.last_tick() is None and store.tick_log() == []

    def test_begin_tick_end_obtains_a_part_as_its_own_method_would_or_leaves_it(self, store: Store) -> None:
        """Every part has something to say: a routine that cannot be planned, a run running too long
        and a later fire. A part obtained is done (``record_tick`` wrote once); one left is None."""

        end_of_tick_world(store)
        ask = TickEndAsk(T0, 2, 0.5, 1.0, erroring_limit=5, run_time_limit=HOUR)
        with store.begin_tick_end(ask) as finish:
            parts = finish()
        if parts.heartbeat is None:
            assert store.last_tick() is None
            store.record_tick(T0, 2, 0.5, 1.0)
        else:
            assert parts.heartbeat == (store.next_wake_at(),) and store.last_tick() == T0
        assert store.tick_log() == [TickMinute(T0, 1, 2, 0.5, 1.0)]
        assert parts.erroring is None or parts.erroring == store.erroring(5)
        assert parts.blocked is None or list(parts.blocked) == store.blocked(T0, HOUR)
        assert [r.routine_id for r in store.blocked(T0, HOUR)] == ["slow"] and store.erroring(5).count == 1

    def test_a_refused_begin_tick_end_starts_nothing(self, store: Store) -> None:
        for ask in (
            TickEndAsk(T0.replace(tzinfo=None), 1, None, None),
            TickEndAsk(T0, -1, None, None),
            TickEndAsk(T0, 1, None, None, erroring_limit="5"),  # type: ignore[arg-type]
            TickEndAsk(T0, 1, None, None, run_time_limit=-HOUR),
        ):
            with pytest.raises(InvalidInput), store.begin_tick_end(ask) as finish:
                finish()
        assert store.last_tick() is None and store.tick_log() == []
