"""Contract: a jittered routine on the store (the ``jitter`` policy).
docs/architecture.md, section "The modules, in detail" (testing/contract_jitter.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from alma_schedule.engine.decide import decide, due_of
from alma_schedule.model import Decision, Fire, Routine, RunKey, RunState
from alma_schedule.policies.jitter import jitter_offset
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import HOUR, MINUTE, SCOPE, SECOND, T0, TIMERS, fire_id, make_routine, register

SETTINGS = Settings()
JITTER = timedelta(minutes=20)
#: hourly, up to 20 minutes late; REGISTERED is on the hour, so the fires are T0 - 1h, T0, T0 + 1h...
JITTERED = {"every": "1h", "jitter": "20m"}


def at(now: datetime) -> Callable[[Routine], Decision]:
    """The engine's ``decide`` bound to ``now``."""
    return lambda routine: decide(routine, now, SETTINGS)


def offset_of(routine_id: str, fire: datetime) -> timedelta:
    return jitter_offset(SCOPE.org, SCOPE.uid, routine_id, fire, JITTER, HOUR)


def jittered(store: Store, routine_id: str = "r1") -> tuple[Routine, timedelta]:
    """A stored jittered routine whose fire at T0 comes due at T0 + offset (offset > 0)."""
    probe = make_routine(routine_id, schedule=JITTERED, last_fire=T0 - HOUR)
    offset = offset_of(routine_id, T0)
    assert timedelta(0) < offset < JITTER, offset  # the key gives a real delay
    assert due_of(probe, T0) == T0 + offset
    return register(store, routine_id, schedule=JITTERED, last_fire=T0 - HOUR, next_due_at=T0 + offset), offset


class JitterContract:
    def test_a_jittered_fire_is_claimed_at_its_due_instant_not_before(self, store: Store) -> None:
        _, offset = jittered(store)
        due = T0 + offset
        assert store.claim_due(due - SECOND, 100, at(due - SECOND), TIMERS).claimed == ()
        [rec] = store.claim_due(due, 100, at(due), TIMERS).claimed
        assert (rec.run_id, rec.fire_at, rec.due_at) == (fire_id(T0), T0, due)  # the id stays nominal
        nxt = T0 + HOUR + offset_of("r1", T0 + HOUR)
        assert rec.expires_at == nxt  # the window runs to the next fire's due instant
        after = store.get_routine(SCOPE, "r1")
        assert after is not None and (after.last_fire, after.next_due_at) == (T0, nxt)
        assert store.get(rec.key) == rec
        assert store.claim_due(nxt - SECOND, 100, at(nxt - SECOND), TIMERS).claimed == ()

    def test_one_batch_keeps_each_fire_its_own_due_instant(self, store: Store) -> None:
        offsets = [jittered(store, rid)[1] for rid in ("j1", "j2")]
        register(store, "plain", schedule={"every": "1h"}, last_fire=T0 - HOUR, next_due_at=T0)
        now = T0 + max(offsets)
        batch = store.claim_due(now, 100, at(now), TIMERS)
        got = {r.routine_id: (r.run_id, r.due_at) for r in batch.claimed}
        assert got == {
            "j1": (fire_id(T0), T0 + offsets[0]),
            "j2": (fire_id(T0), T0 + offsets[1]),
            "plain": (fire_id(T0), T0),
        }
        assert {rid: store.get(RunKey.of(SCOPE, rid, fire_id(T0))) for rid in got} == {
            r.routine_id: r for r in batch.claimed
        }

    def test_the_routine_is_not_selected_before_its_due_instant(self, store: Store) -> None:
        _, offset = jittered(store)
        calls: list[str] = []

        def counting(routine: Routine) -> Decision:
            calls.append(routine.routine_id)
            return decide(routine, T0 + offset - SECOND, SETTINGS)

        store.claim_due(T0 + offset - SECOND, 100, counting, TIMERS)
        assert calls == []  # next_due_at is the due instant, not the nominal T0

    def test_an_overlap_skip_keeps_its_due_instant(self, store: Store) -> None:
        _, offset = jittered(store)
        [first] = store.claim_due(T0 + offset, 100, at(T0 + offset), TIMERS).claimed
        assert store.start(first.key, now=T0 + offset).won
        nxt = T0 + HOUR + offset_of("r1", T0 + HOUR)
        batch = store.claim_due(nxt, 100, at(nxt), TIMERS)
        [skip] = batch.skipped
        assert (skip.state, skip.reason, skip.run_id) == (RunState.SKIPPED, "overlap", fire_id(T0 + HOUR))
        assert (skip.fire_at, skip.due_at) == (T0 + HOUR, nxt)

    def test_a_fire_without_due_at_stores_its_fire_instant(self, store: Store) -> None:
        register(store)
        [rec] = store.claim_due(T0, 10, lambda r: Fire(fire_id(T0), T0, T0 + MINUTE, T0 + MINUTE), TIMERS).claimed
        assert rec.due_at == T0 and store.get(rec.key) == rec

    def test_a_manual_run_is_due_when_triggered(self, store: Store) -> None:
        jittered(store)
        key = RunKey.of(SCOPE, "r1", "manual:01")
        res = store.claim_manual(key, now=T0, expires_at=T0 + HOUR, resend_at=T0 + MINUTE)
        assert res.won and res.record is not None and res.record.due_at == T0 == res.record.fire_at
        assert store.get(key) == res.record

    def test_lag_is_start_minus_due_at(self, store: Store) -> None:
        _, offset = jittered(store)
        [rec] = store.claim_due(T0 + offset, 100, at(T0 + offset), TIMERS).claimed
        res = store.start(rec.key, now=T0 + offset + 3 * SECOND)
        assert res.won and res.record is not None
        assert res.record.lag == 3 * SECOND  # not offset + 3 s: the jitter is not lateness
        stored = store.get(rec.key)
        assert stored is not None and stored.lag == 3 * SECOND
