"""Contract: the tick log (issue 17): one row per minute, merged by each tick of it, pruned after
``TICK_LOG_KEEP_DAYS``, read newest first."""

from __future__ import annotations

from datetime import timedelta

from alma_schedule.model import TickMinute
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import T0


class TickLogContract:
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
