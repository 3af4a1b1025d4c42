"""Contract: the tick's claims (``claim_due``, ``claim_manual``) and take-style writes (resends, polls)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import (
    ClaimBatch,
    ClaimResult,
    ClaimScan,
    Decision,
    Defer,
    Fire,
    NotDue,
    Resends,
    Routine,
    RunKey,
    RunRecord,
)
from alma_schedule.settings import Timers
from alma_schedule.stores.base import Store
from alma_schedule.stores.fast import FastStore
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    SCOPE,
    SECOND,
    T0,
    TIMERS,
    Counting,
    claim,
    fire_due,
    fire_due_long,
    fire_id,
    fire_next_due,
    key_of,
    raising,
    register,
    run_in,
    running,
    submitted,
)


def _manual(store: Store, run_id: str = "manual:01", rid: str = "r1") -> ClaimResult:
    return store.claim_manual(RunKey.of(SCOPE, rid, run_id), now=T0, expires_at=T0 + HOUR, resend_at=T0 + 2 * MINUTE)


class ClaimContract:
    # ------------------------------------------------------------------ claim_due

    def test_claim_concurrency_claims_run_at_once_on_disjoint_routines(self, store: FastStore) -> None:
        """``claim_concurrency`` claims can be open at once: each waits, inside its transaction (in
        ``decide``), until all are; they lock disjoint routines and each fire is claimed once."""
        n = store.claim_concurrency
        assert isinstance(n, int) and n >= 1
        for i in range(4 * n):
            register(store, f"r{i}")
        meet = threading.Barrier(n, timeout=20)
        waited: set[int] = set()

        def claimer(i: int) -> ClaimBatch:
            def decide(r: Routine) -> Decision:
                if i not in waited:
                    waited.add(i)
                    meet.wait()
                decision: Decision = fire_due(r)
                return decision

            return store.claim_due(T0, 2, decide, TIMERS)

        out: list[ClaimBatch] = []
        threads = [threading.Thread(target=lambda i=i: out.append(claimer(i))) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        claimed = [r.routine_id for b in out for r in b.claimed]
        assert len(out) == n and len(claimed) == 2 * n == len(set(claimed))

    def test_claim_due_claims_and_advances_the_cursor_once(self, store: Store) -> None:
        routine = register(store)
        batch = store.claim_due(T0, 100, fire_due, TIMERS)
        assert batch.skipped == () and batch.deferred == ()
        [rec] = batch.claimed
        assert (rec.org, rec.uid, rec.routine_id, rec.run_id) == ("org-a", "user-1", "r1", fire_id(T0))
        assert (rec.state, rec.origin, rec.reason) == ("claimed", "schedule", None)
        assert (rec.fire_at, rec.claimed_at, rec.state_at, rec.expires_at) == (T0, T0, T0, T0 + MINUTE)
        assert rec.resend_at == T0 + TIMERS.resend_first and rec.send_attempts == 0
        assert rec.config_revision == routine.config_revision
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == rec
        after = store.get_routine(SCOPE, "r1")
        assert after is not None and after.last_fire == T0 and after.next_due_at == T0 + MINUTE
        assert store.claim_due(T0, 100, fire_due, TIMERS).claimed == ()
        assert store.list_runs(SCOPE) == [rec]

    def test_fire_resend_at_is_kept(self, store: Store) -> None:
        register(store)

        def decide(r: Routine) -> Fire:
            return Fire(fire_id(T0), T0, T0 + HOUR, T0 + MINUTE, resend_at=T0 + 7 * SECOND)

        [rec] = store.claim_due(T0, 10, decide, TIMERS).claimed
        assert rec.resend_at == T0 + 7 * SECOND

    def test_claim_due_takes_the_oldest_due_first_up_to_limit(self, store: Store) -> None:
        for i, rid in enumerate(["c", "a", "d", "b"]):
            register(store, rid, next_due_at=T0 - (3 - i) * MINUTE)  # c oldest, b == T0
        register(store, "later", next_due_at=T0 + SECOND)
        hourly = fire_next_due(step=HOUR)
        first = store.claim_due(T0, 2, hourly, TIMERS)
        assert [r.routine_id for r in first.claimed] == ["c", "a"]
        second = store.claim_due(T0, 10, hourly, TIMERS)
        assert sorted(r.routine_id for r in second.claimed) == ["b", "d"]
        assert store.claim_due(T0, 10, hourly, TIMERS).claimed == ()

    def test_batches_sharing_a_claim_scan_claim_every_due_fire_once(self, store: FastStore) -> None:
        """One tick's batches share a :class:`ClaimScan` (PostgreSQL starts each batch past the last
        one's rows): every due fire is claimed once, a routine that comes due BEHIND the rows
        already locked included (PostgreSQL: the short batch's claim of the rows it passed over)."""
        for i in range(7):
            register(store, f"r{i}", next_due_at=T0 - (10 - i) * MINUTE)
        scan, hourly, got = ClaimScan(), Counting(fire_next_due(step=HOUR)), []
        first = store.claim_due(T0, 3, hourly, TIMERS, scan)
        assert [r.routine_id for r in first.claimed] == ["r0", "r1", "r2"]
        register(store, "early", next_due_at=T0 - 30 * MINUTE)  # behind every row the scan locked
        for _ in range(3):
            batch = store.claim_due(T0, 3, hourly, TIMERS, scan)
            got += [r.routine_id for r in batch.claimed]
        assert sorted(got) == ["early", "r3", "r4", "r5", "r6"]
        assert all(n == 1 for n in hourly.calls.values()) and len(hourly.calls) == 8
        assert store.claim_due(T0, 10, hourly, TIMERS, ClaimScan()).claimed == ()

    def test_claim_due_refuses_a_scan_that_is_not_a_claim_scan(self, store: FastStore) -> None:
        register(store)
        with pytest.raises(InvalidInput, match="scan must be a ClaimScan"):
            store.claim_due(T0, 10, fire_due, TIMERS, object())  # type: ignore[arg-type]
        assert store.list_runs(SCOPE) == []

    def test_claim_due_ignores_inactive_routines(self, store: Store) -> None:
        for rid in ("paused", "disabled", "deleted"):
            register(store, rid)
        store.set_paused(SCOPE, "paused", "operator", now=T0, next_due_at=None)
        store.set_enabled(SCOPE, "disabled", False, now=T0, next_due_at=None)
        store.delete_routine(SCOPE, "deleted", now=T0)
        decide = Counting(fire_due)
        assert store.claim_due(T0 + HOUR, 10, decide, TIMERS) == ClaimBatch()
        assert decide.calls == {}

    def test_decide_raising_defers_once_then_backs_off(self, store: Store) -> None:
        register(store)
        decide = Counting(raising)
        batch = store.claim_due(T0, 10, decide, TIMERS)
        assert batch.claimed == () and batch.skipped == ()
        [d] = batch.deferred
        assert (d.routine_id, d.first, d.until) == ("r1", True, T0 + TIMERS.defer_first)
        assert "cannot plan r1" in d.error
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.defer_until == d.until and row.last_error and row.error_count == 1
        assert row.next_due_at == T0 and row.last_fire is None
        # not locked again before defer_until
        assert store.peek_due(d.until - SECOND, 10) == []
        assert store.claim_due(d.until - SECOND, 10, decide, TIMERS).deferred == ()
        assert decide.calls == {"r1": 1}
        later = store.claim_due(d.until, 10, decide, TIMERS)
        [d2] = later.deferred
        assert d2.first is False and d2.until > d.until
        assert store.list_runs(SCOPE) == []
        # a successful fire clears the back-off
        fixed = store.claim_due(d2.until, 10, fire_due, TIMERS)
        assert len(fixed.claimed) == 1
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and (row.defer_until, row.last_error, row.error_count) == (None, None, 0)

    def test_decide_returning_defer(self, store: Store) -> None:
        register(store)
        batch = store.claim_due(T0, 10, lambda r: Defer(T0 + HOUR, "no plan"), TIMERS)
        [d] = batch.deferred
        assert (d.until, d.error, d.first) == (T0 + HOUR, "no plan", True)
        assert store.peek_due(T0 + HOUR - SECOND, 10) == []
        assert [r.routine_id for r in store.peek_due(T0 + HOUR, 10)] == ["r1"]

    def test_not_due_only_moves_the_index(self, store: Store) -> None:
        register(store, last_fire=T0 - MINUTE)
        batch = store.claim_due(T0, 10, lambda r: NotDue(T0 + 5 * MINUTE), TIMERS)
        assert batch == dataclasses.replace(batch, claimed=(), skipped=(), deferred=())
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.next_due_at == T0 + 5 * MINUTE and row.last_fire == T0 - MINUTE
        assert store.list_runs(SCOPE) == []

    def test_a_fire_the_cursor_has_passed_is_never_claimed(self, store: Store) -> None:
        register(store, last_fire=T0, next_due_at=T0)  # a stale index: the T0 fire was taken
        batch = store.claim_due(T0, 10, fire_due, TIMERS)
        assert batch.claimed == () and batch.skipped == ()
        assert store.list_runs(SCOPE) == []
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.last_fire == T0

    def test_missed_fire_is_recorded_skipped(self, store: Store) -> None:
        register(store)
        batch = store.claim_due(T0, 10, fire_next_due(missed=True), TIMERS)
        assert batch.claimed == ()
        [rec] = batch.skipped
        assert (rec.state, rec.reason, rec.run_id) == ("skipped", "missed", fire_id(T0))
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.last_fire == T0 and row.next_due_at == T0 + MINUTE
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == rec

    @pytest.mark.parametrize("state", ["running", "submitted", "collecting"])
    def test_active_run_makes_the_next_fire_skipped_overlap(self, store: Store, state: str) -> None:
        active = run_in(store, state)
        t1 = T0 + MINUTE
        batch = store.claim_due(t1, 10, fire_due, TIMERS)
        assert batch.claimed == ()
        [rec] = batch.skipped
        assert (rec.state, rec.reason, rec.run_id, rec.fire_at) == ("skipped", "overlap", fire_id(t1), t1)
        assert store.get(RunKey.of(SCOPE, "r1", active.run_id)) == active
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.last_fire == t1 and row.next_due_at == t1 + MINUTE

    def test_claimed_manual_run_makes_the_fire_skipped_overlap(self, store: Store) -> None:
        register(store)
        manual = _manual(store)
        batch = store.claim_due(T0, 10, fire_due, TIMERS)
        [rec] = batch.skipped
        assert (rec.reason, batch.claimed) == ("overlap", ())
        assert store.get(RunKey.of(SCOPE, "r1", "manual:01")) == manual.record

    def test_newer_fire_supersedes_an_older_claimed_one(self, store: Store) -> None:
        register(store)
        old = claim(store, decide=fire_due_long)
        t1 = T0 + MINUTE
        batch = store.claim_due(t1, 10, fire_due_long, TIMERS)
        [new] = batch.claimed
        assert (new.run_id, new.state) == (fire_id(t1), "claimed")
        [gone] = batch.skipped
        assert (gone.run_id, gone.state, gone.reason) == (old.run_id, "skipped", "missed")
        assert store.get(RunKey.of(SCOPE, "r1", old.run_id)) == gone

    def test_a_fire_whose_run_key_exists_is_a_duplicate_that_moves_nothing(self, store: Store) -> None:
        """A fire carrying a run id that already has a row (its fire was claimed before) gets no row
        and supersedes nothing, not even that row; the rest of the batch claims as usual."""
        register(store)
        t1 = T0 + MINUTE
        register(store, "r2", next_due_at=t1)
        old = claim(store, decide=fire_due_long)

        def decide(routine: Routine) -> Fire:
            fire: Fire = fire_due_long(routine)
            return dataclasses.replace(fire, run_id=old.run_id) if routine.routine_id == "r1" else fire

        batch = store.claim_due(t1, 10, decide, TIMERS)
        assert [r.routine_id for r in batch.claimed] == ["r2"] and batch.skipped == batch.buffered == ()
        assert store.get(old.key) == old
        assert [r.run_id for r in store.list_runs(SCOPE, routine_id="r1")] == [old.run_id]

    # ------------------------------------------------------------------ claim_manual

    def test_claim_manual_claims_without_moving_the_cursor(self, store: Store) -> None:
        before = register(store, last_fire=T0 - MINUTE)
        res = store.claim_manual(
            RunKey.of(SCOPE, "r1", "manual:01"), now=T0, expires_at=T0 + HOUR, resend_at=T0 + MINUTE
        )
        assert res.won and res.reason == "won" and res.record is not None
        rec = res.record
        assert (rec.state, rec.origin, rec.run_id, rec.fire_at, rec.claimed_at) == (
            "claimed",
            "manual",
            "manual:01",
            T0,
            T0,
        )
        assert (rec.expires_at, rec.resend_at, rec.config_revision) == (
            T0 + HOUR,
            T0 + MINUTE,
            before.config_revision,
        )
        after = store.get_routine(SCOPE, "r1")
        assert after is not None and (after.last_fire, after.next_due_at) == (
            before.last_fire,
            before.next_due_at,
        )
        assert store.get(RunKey.of(SCOPE, "r1", "manual:01")) == rec

    @pytest.mark.parametrize("state", ["claimed", "running", "submitted", "collecting"])
    def test_claim_manual_refused_while_a_run_is_non_terminal(self, store: Store, state: str) -> None:
        blocking = run_in(store, state)
        res = _manual(store)
        assert (res.won, res.reason, res.record) == (False, "overlap", blocking)
        assert store.get(RunKey.of(SCOPE, "r1", "manual:01")) is None

    def test_claim_manual_refused_while_a_manual_run_is_claimed(self, store: Store) -> None:
        register(store)
        first = _manual(store, "manual:01")
        res = _manual(store, "manual:02")
        assert (res.won, res.reason, res.record) == (False, "overlap", first.record)

    @pytest.mark.parametrize("lever", ["paused", "disabled", "deleted"])
    def test_claim_manual_refused_for_inactive_routines(self, store: Store, lever: str) -> None:
        register(store)
        if lever == "paused":
            store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        elif lever == "disabled":
            store.set_enabled(SCOPE, "r1", False, now=T0, next_due_at=None)
        else:
            store.delete_routine(SCOPE, "r1", now=T0)
        res = _manual(store)
        assert (res.won, res.reason, res.record) == (False, lever, None)
        assert store.list_runs(SCOPE) == []

    def test_claim_manual_unknown_routine(self, store: Store) -> None:
        res = _manual(store, rid="nope")
        assert (res.won, res.reason, res.record) == (False, "not_found", None)

    # ------------------------------------------------------------------ take_resends

    def test_take_resends_expires_even_when_sends_are_paused(self, store: Store) -> None:
        register(store)
        rec = claim(store, decide=fire_due)  # expires at T0 + 1 minute
        assert store.take_resends(T0 + MINUTE - SECOND, 10, TIMERS, send=False).expired == ()
        res = store.take_resends(T0 + MINUTE, 10, TIMERS, send=False)
        assert res.resend == ()
        [gone] = res.expired
        assert (gone.run_id, gone.state, gone.reason) == (rec.run_id, "skipped", "missed")
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == gone
        assert store.take_resends(T0 + HOUR, 10, TIMERS) == Resends()

    def test_take_resends_backs_off(self, store: Store) -> None:
        register(store)
        rec = claim(store)  # resend_at T0 + resend_first, expires T0 + 1 hour
        first_due = T0 + TIMERS.resend_first
        assert store.take_resends(first_due - SECOND, 10, TIMERS).resend == ()
        [again] = store.take_resends(first_due, 10, TIMERS).resend
        assert again.run_id == rec.run_id and again.state == "claimed" and again.send_attempts == 1
        assert again.resend_at == first_due + Timers.backoff(TIMERS.resend_first, TIMERS.resend_max, 1)
        assert store.take_resends(first_due, 10, TIMERS).resend == ()
        assert again.resend_at is not None
        [third] = store.take_resends(again.resend_at, 10, TIMERS).resend
        assert third.send_attempts == 2
        assert third.resend_at == again.resend_at + Timers.backoff(TIMERS.resend_first, TIMERS.resend_max, 2)

    def test_take_resends_takes_each_row_once_up_to_limit(self, store: Store) -> None:
        for i in range(5):
            register(store, f"r{i}")
        keys = {r.key for r in store.claim_due(T0, 10, fire_due_long, TIMERS).claimed}
        assert len(keys) == 5
        now = T0 + TIMERS.resend_first
        taken: list[RunRecord] = []
        for _ in range(4):
            taken += store.take_resends(now, 2, TIMERS).resend
        assert len(taken) == 5 and {r.key for r in taken} == keys

    def test_take_resends_covers_manual_runs(self, store: Store) -> None:
        register(store)
        res = _manual(store)  # resend_at T0 + 2 min, expires T0 + 1 hour
        assert res.record is not None
        [again] = store.take_resends(T0 + 2 * MINUTE, 10, TIMERS).resend
        assert again.key == res.record.key and again.send_attempts == 1
        [gone] = store.take_resends(T0 + HOUR, 10, TIMERS).expired
        assert (gone.key, gone.state, gone.reason) == (res.record.key, "skipped", "missed")

    def test_take_resends_ignores_started_runs(self, store: Store) -> None:
        register(store)
        rec = running(store)
        res = store.take_resends(T0 + 2 * HOUR, 10, TIMERS)
        assert res == Resends()
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == rec

    # ------------------------------------------------------------------ take_polls

    def test_take_polls_backs_off_and_takes_once(self, store: Store) -> None:
        register(store)
        rec = submitted(store)  # next_poll_at T0 + 30 s
        assert store.take_polls(T0 + 29 * SECOND, 10, TIMERS) == []
        [polled] = store.take_polls(T0 + 30 * SECOND, 10, TIMERS)
        assert polled.key == rec.key and polled.state == "submitted" and polled.poll_attempts == 1
        assert polled.next_poll_at == T0 + 30 * SECOND + Timers.backoff(TIMERS.poll_first, TIMERS.poll_max, 1)
        assert store.take_polls(T0 + 30 * SECOND, 10, TIMERS) == []
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == polled
        assert key_of("r1", rec.run_id) == rec.key
