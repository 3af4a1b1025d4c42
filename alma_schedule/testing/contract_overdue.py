"""Contract: the "did not run" alarm (``expect``): ``overdue`` names a routine's overdue fire (a late
cursor, or a run not ended successfully), nothing for a paused, resumed or succeeded routine; the
alert rows (``take_alerts``, ``alert_retry``, ``alert_delivered``) are taken once and delivered once."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import RunResult, RunState
from alma_schedule.model.overdue import OverdueFire
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    MINUTE,
    OTHER_ORG,
    SCOPE,
    SECOND,
    T0,
    TIMERS,
    claim,
    register,
    running,
)

EXPECT = {"every": 60, "expect": "30s"}
LEASE = 5 * MINUTE


def _one(store: Store, now: datetime) -> OverdueFire:
    found = store.overdue(now)
    assert len(found) == 1, found
    return found[0]


class OverdueContract:
    def test_a_routine_without_expect_is_never_overdue(self, store: Store) -> None:
        register(store, next_due_at=T0)
        assert store.overdue(T0 + timedelta(days=1)) == []

    def test_a_late_cursor_is_overdue_from_its_instant_plus_expect(self, store: Store) -> None:
        register(store, next_due_at=T0, schedule=EXPECT)
        assert store.overdue(T0 + 29 * SECOND) == []
        fire = _one(store, T0 + 30 * SECOND)
        assert (fire.routine_key, fire.fire_at, fire.overdue_since) == (("org-a", "user-1", "r1"), T0, T0 + 30 * SECOND)
        assert (fire.run_id, fire.state, fire.delivered_at) == (None, None, None)
        assert fire.key == "org-a/user-1/r1/2026-03-01T12:00:00Z"

    def test_a_claimed_run_not_ended_is_overdue_and_stays_so_until_the_next_fire_is(self, store: Store) -> None:
        register(store, next_due_at=T0, schedule=EXPECT)
        rec = claim(store, now=T0)
        assert store.overdue(T0 + 20 * SECOND) == []
        fire = _one(store, T0 + 40 * SECOND)
        assert (fire.fire_at, fire.run_id, fire.state) == (T0, rec.run_id, RunState.CLAIMED)
        # the next fire is due at T0 + 1m but not yet overdue: the T0 fire is still named
        assert _one(store, T0 + MINUTE + 10 * SECOND).fire_at == T0
        # the cursor (T0 + 1m) is now late too: the newer fire is named
        assert _one(store, T0 + MINUTE + 30 * SECOND).fire_at == T0 + MINUTE

    def test_a_run_that_succeeds_clears_it_and_a_failed_one_does_not(self, store: Store) -> None:
        register(store, next_due_at=T0, schedule=EXPECT)
        rec = running(store, now=T0)
        store.finish(rec.key, RunResult("failed", "runner_error"), now=T0 + SECOND, timers=TIMERS)
        assert _one(store, T0 + 40 * SECOND).state == RunState.FAILED
        nxt = running(store, now=T0 + MINUTE)
        store.finish(nxt.key, RunResult("completed", "ok"), now=T0 + MINUTE + SECOND, timers=TIMERS)
        assert store.overdue(T0 + MINUTE + 5 * SECOND) == []  # the T0 fire: a later run succeeded
        assert store.overdue(T0 + MINUTE + 40 * SECOND) == []

    def test_a_paused_routine_raises_nothing_nor_after_its_resume(self, store: Store) -> None:
        register(store, next_due_at=T0, schedule=EXPECT)
        rec = running(store, now=T0)
        store.finish(rec.key, RunResult("failed", "runner_error"), now=T0 + SECOND, timers=TIMERS)
        store.set_paused(SCOPE, "r1", "operator", now=T0 + 2 * SECOND, next_due_at=None)
        assert store.overdue(T0 + 10 * MINUTE) == []  # its fires came due while it was paused
        store.set_paused(SCOPE, "r1", None, now=T0 + 10 * MINUTE, next_due_at=T0 + 11 * MINUTE)
        assert store.overdue(T0 + 10 * MINUTE + 50 * SECOND) == []  # restarted: the old failure is not looked at
        store.set_enabled(SCOPE, "r1", False, now=T0 + 12 * MINUTE, next_due_at=None)
        assert store.overdue(T0 + HOUR_) == []

    def test_listed_in_key_order_up_to_the_limit(self, store: Store) -> None:
        register(store, "r2", next_due_at=T0, schedule=EXPECT)
        register(store, "r1", next_due_at=T0, schedule=EXPECT, scope=OTHER_ORG)
        register(store, "r3", next_due_at=T0, schedule=EXPECT)
        store.delete_routine(SCOPE, "r3", now=T0)
        found = store.overdue(T0 + MINUTE)
        assert [(f.org, f.routine_id) for f in found] == [("org-a", "r2"), ("org-b", "r1")]
        assert len(store.overdue(T0 + MINUTE, limit=1)) == 1

    def test_an_alert_is_taken_once_per_lease_and_never_after_its_2xx(self, store: Store) -> None:
        register(store, next_due_at=T0, schedule=EXPECT)
        now = T0 + MINUTE
        fire = _one(store, now)
        assert store.alert_state(fire.fire_key) is None
        assert store.take_alerts([fire], now=now, lease_until=now + LEASE) == [fire]
        assert store.take_alerts([fire], now=now + MINUTE, lease_until=now + LEASE) == []  # leased
        state = store.alert_state(fire.fire_key)
        assert state is not None
        assert (state.attempts, state.next_attempt_at, state.delivered_at) == (1, now + LEASE, None)
        assert store.alert_retry(fire.fire_key, lease_until=now + 2 * LEASE) is True
        assert store.take_alerts([fire], now=now + LEASE, lease_until=now + 3 * LEASE) == []  # pushed
        assert store.take_alerts([fire], now=now + 2 * LEASE, lease_until=now + 3 * LEASE) == [fire]  # lost: again
        state = store.alert_state(fire.fire_key)
        assert state is not None and state.attempts == 3
        assert store.alert_delivered(fire.fire_key, now=now + 2 * LEASE) is True
        assert store.alert_delivered(fire.fire_key, now=now + 3 * LEASE) is False  # the first wins
        assert store.take_alerts([fire], now=now + 4 * LEASE, lease_until=now + 5 * LEASE) == []
        assert store.alert_retry(fire.fire_key, lease_until=now + 9 * LEASE) is False
        assert _one(store, now + 4 * LEASE).delivered_at == now + 2 * LEASE

    def test_alert_writes_refuse_bad_keys_and_unknown_fires_change_nothing(self, store: Store) -> None:
        with pytest.raises(InvalidInput):
            store.alert_state(("org-a", "user-1", "r1", datetime(2026, 3, 1)))  # naive
        with pytest.raises(InvalidInput):
            store.alert_delivered(("", "user-1", "r1", T0), now=T0)
        assert store.alert_delivered(("org-a", "user-1", "r1", T0), now=T0) is False
        assert store.alert_retry(("org-a", "user-1", "r1", T0), lease_until=T0) is False
        assert store.alert_state(("org-a", "user-1", "r1", T0)) is None
        assert store.take_alerts([], now=T0, lease_until=T0 + LEASE) == []


HOUR_ = timedelta(hours=1)
