"""Contract: business calendars, system data: stored by name and versioned (insert at 1, each change
+ 1, a compare-and-set on the version), read one or all in name order; the routines that name one;
a delete refused while a live routine names it (naming them, nothing deleted); bad input refused;
a claim's collided fires (``Fire.collided``) recorded ``skipped(calendar)`` beside it, once each."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from alma_schedule.errors import CalendarInUse, InvalidInput, StoreConflict
from alma_schedule.model import Decision, Fire, Routine, RunState
from alma_schedule.model.calendar import Calendar
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import OTHER_ORG, SCOPE, T0, TIMERS, fire_due_long, register

ON_US = {"cron": "0 9 L * *", "tz": "America/New_York", "calendar": "us", "roll": "preceding"}


def us(**kw: object) -> Calendar:
    fields: dict[str, object] = {
        "name": "us",
        "country": "US",
        "first_year": 2026,
        "last_year": 2027,
        "holidays": (("2026-12-25", "Christmas Day"), ("2027-01-01", "New Year's Day")),
    }
    fields.update(kw)
    return Calendar(**fields)  # type: ignore[arg-type]


class CalendarContract:
    def test_a_calendar_is_stored_versioned_and_read_back(self, store: Store) -> None:
        assert store.get_calendar("us") is None and store.list_calendars() == []
        first = store.put_calendar(us(added=("2026-12-24",)), now=T0)
        assert (first.version, first.updated_at) == (1, T0)
        assert store.get_calendar("us") == first
        assert first.holidays == (("2026-12-25", "Christmas Day"), ("2027-01-01", "New Year's Day"))
        assert (first.country, first.weekend, first.added) == ("US", (5, 6), ("2026-12-24",))
        later = T0 + timedelta(hours=1)
        second = store.put_calendar(us(last_year=2030, subdiv="NY"), now=later)
        assert (second.version, second.last_year, second.subdiv, second.updated_at) == (2, 2030, "NY", later)
        assert store.get_calendar("us") == second
        store.put_calendar(us(name="gb", country="GB", market=None), now=T0)
        assert [c.name for c in store.list_calendars()] == ["gb", "us"]

    def test_the_version_is_a_compare_and_set(self, store: Store) -> None:
        with pytest.raises(StoreConflict):
            store.put_calendar(us(), now=T0, expected_version=1)
        assert store.get_calendar("us") is None
        store.put_calendar(us(), now=T0, expected_version=0)
        with pytest.raises(StoreConflict):
            store.put_calendar(us(last_year=2040), now=T0, expected_version=0)
        stored = store.get_calendar("us")
        assert stored is not None and (stored.version, stored.last_year) == (1, 2027)
        assert store.put_calendar(us(last_year=2040), now=T0, expected_version=1).version == 2

    def test_a_calendar_in_use_is_not_deleted_and_its_routines_are_named(self, store: Store) -> None:
        store.put_calendar(us(), now=T0)
        register(store, "b-month-end", schedule=ON_US)
        register(store, "a-elsewhere", scope=OTHER_ORG, schedule=ON_US)
        register(store, "plain")
        register(store, "gone", schedule=ON_US)
        store.delete_routine(SCOPE, "gone", now=T0)
        users = [(SCOPE.org, SCOPE.uid, "b-month-end"), (OTHER_ORG.org, OTHER_ORG.uid, "a-elsewhere")]
        assert store.calendar_users("us") == users
        assert store.calendar_users("us", limit=1) == users[:1]
        with pytest.raises(CalendarInUse, match="b-month-end") as refused:
            store.delete_calendar("us")
        assert refused.value.routines == ("org-a/user-1/b-month-end", "org-b/user-1/a-elsewhere")
        assert store.get_calendar("us") is not None
        store.delete_routine(SCOPE, "b-month-end", now=T0)
        store.delete_routine(OTHER_ORG, "a-elsewhere", now=T0)
        assert store.delete_calendar("us") is True
        assert store.get_calendar("us") is None and store.delete_calendar("us") is False

    def test_bad_calendar_input_is_refused_and_writes_nothing(self, store: Store) -> None:
        with pytest.raises(InvalidInput, match="'name'"):
            store.get_calendar("Not A Name")
        with pytest.raises(InvalidInput, match="'name'"):
            store.delete_calendar("")
        with pytest.raises(InvalidInput, match="now"):
            store.put_calendar(us(), now=datetime(2026, 1, 1))
        with pytest.raises(InvalidInput, match="expected_version"):
            store.put_calendar(us(), now=T0, expected_version=-1)
        with pytest.raises(InvalidInput, match="calendar"):
            store.put_calendar({"name": "us"}, now=T0)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="limit"):
            store.calendar_users("us", limit=1.5)  # type: ignore[arg-type]
        assert store.list_calendars() == []

    def test_a_claims_collided_fires_are_recorded_skipped_calendar_once(self, store: Store) -> None:
        register(store, "r1")
        register(store, "r2")
        sat, sun = T0 - timedelta(hours=48), T0 - timedelta(hours=24)

        def colliding(routine: Routine) -> Decision:
            fire = fire_due_long(routine)
            assert isinstance(fire, Fire)
            return replace(fire, collided=(sat, sun))

        batch = store.claim_due(T0, 100, colliding, TIMERS)
        assert sorted(r.routine_id for r in batch.claimed) == ["r1", "r2"]
        rows = {(r.routine_id, r.run_id): r for r in batch.skipped}
        assert sorted(rows) == [(r, i) for r in ("r1", "r2") for i in ("2026-02-27T12:00:00Z", "2026-02-28T12:00:00Z")]
        for rec in rows.values():
            assert (rec.state, rec.reason, rec.origin) == (RunState.SKIPPED, "calendar", "schedule")
            assert rec.finished_at == T0
            assert rec.fire_at in (sat, sun) and store.get(rec.key) == rec
        again = store.claim_due(T0 + timedelta(hours=1), 100, colliding, TIMERS)  # the same collided fires again
        assert [r for r in again.skipped if r.reason == "calendar"] == []  # their rows exist: left as they are
        assert len(store.list_runs(SCOPE, limit=100)) == 6 + len(again.claimed)

    def test_bad_collided_fires_defer_the_routine_and_write_no_row(self, store: Store) -> None:
        bad_ones: list[object] = [(datetime(2026, 1, 1),), (T0 + timedelta(days=1),), [T0 - timedelta(days=1)]]
        for i, bad in enumerate(bad_ones):
            register(store, f"b{i}")  # the routines before it are held back by their deferral

            def deciding(routine: Routine, bad: object = bad) -> Decision:
                fire = fire_due_long(routine)
                assert isinstance(fire, Fire)
                return replace(fire, collided=bad)  # type: ignore[arg-type]

            batch = store.claim_due(T0, 100, deciding, TIMERS)
            assert batch.claimed == batch.skipped == () and [d.routine_id for d in batch.deferred] == [f"b{i}"]
            assert "collided" in batch.deferred[0].error
        assert store.list_runs(SCOPE, limit=10) == []
