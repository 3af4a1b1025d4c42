"""Contract: overlap ``latest`` (``Fire.buffer``): the routine's one ``buffered`` fire.
docs/architecture.md, section "The modules, in detail" (testing/contract_buffered.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

import pytest

from alma_schedule.model import ClaimResult, Fire, Routine, RunKey, RunRecord, RunResult
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    SCOPE,
    T0,
    TIMERS,
    Decide,
    collecting,
    fire_due_long,
    fire_id,
    key_of,
    register,
    running,
    submitted,
)


def buffering(decide: Decide = fire_due_long) -> Decide:
    """``decide`` for a routine with ``overlap: latest``."""

    def wrapped(routine: Routine) -> Fire:
        fire: Fire = decide(routine)
        return dataclasses.replace(fire, buffer=True)

    return wrapped


LATEST = buffering()


def _buffer(store: Store, at: datetime, decide: Decide = LATEST) -> RunRecord:
    batch = store.claim_due(at, 100, decide, TIMERS)
    assert batch.claimed == (), batch
    [rec] = batch.buffered
    return rec


def _open(store: Store, routine_id: str = "r1") -> list[RunRecord]:
    return [r for r in store.list_runs(SCOPE, routine_id=routine_id, limit=1000) if not r.terminal]


Ending = Callable[[Store, RunRecord, datetime], ClaimResult]


def _finishing(result: RunResult) -> Ending:
    return lambda s, r, at: s.finish(r.key, result, now=at, timers=TIMERS)


def _recording(outcome: str) -> Ending:
    return lambda s, r, at: s.record(r.key, outcome, "operator", now=at)


ENDINGS: dict[str, tuple[Callable[..., RunRecord], Ending]] = {
    "finish completed": (running, _finishing(RunResult.completed())),
    "finish failed": (running, _finishing(RunResult.failed("runner_error"))),
    "finish refused": (running, _finishing(RunResult.refused("not_admitted"))),
    "timed_out": (submitted, _finishing(RunResult.timed_out())),
    "collecting failed": (collecting, _finishing(RunResult.failed("provider_error"))),
    "record running": (running, _recording("failed")),
    "record submitted": (submitted, _recording("completed")),
}


class BufferedContract:
    def test_a_blocked_fire_of_a_latest_routine_is_buffered(self, store: Store) -> None:
        register(store)
        active = running(store)
        rec = _buffer(store, T0 + MINUTE)
        assert (rec.state, rec.reason, rec.origin, rec.run_id) == ("buffered", None, "schedule", fire_id(T0 + MINUTE))
        assert (rec.fire_at, rec.expires_at) == (T0 + MINUTE, T0 + MINUTE + HOUR)  # its normal window
        assert store.get(rec.key) == rec
        assert store.get(active.key) == active  # the active run is untouched
        assert {r.state for r in _open(store)} == {"running", "buffered"}
        routine = store.get_routine(SCOPE, "r1")
        assert routine is not None and routine.last_fire == T0 + MINUTE

    def test_without_buffer_the_blocked_fire_is_skipped_overlap(self, store: Store) -> None:
        register(store)
        running(store)
        batch = store.claim_due(T0 + MINUTE, 100, fire_due_long, TIMERS)
        assert batch.buffered == () and [(r.state, r.reason) for r in batch.skipped] == [("skipped", "overlap")]

    def test_a_newer_fire_replaces_the_buffered_one(self, store: Store) -> None:
        register(store)
        running(store)
        old = _buffer(store, T0 + MINUTE)
        batch = store.claim_due(T0 + 2 * MINUTE, 100, LATEST, TIMERS)
        [new] = batch.buffered
        [gone] = batch.skipped
        assert gone.key == old.key and (gone.state, gone.reason) == ("skipped", "overlap")
        assert gone.finished_at == T0 + 2 * MINUTE
        assert new.run_id == fire_id(T0 + 2 * MINUTE) and new.state == "buffered"
        assert store.get(old.key) == gone
        assert [r.run_id for r in _open(store) if r.state == "buffered"] == [new.run_id]  # at most one

    def test_a_duplicate_fire_replaces_no_buffered_one(self, store: Store) -> None:
        """A newer fire carrying the buffered row's own run id is a duplicate: no row, and the
        buffered one stays as it was."""
        register(store)
        running(store)
        old = _buffer(store, T0 + MINUTE)

        def same_id(routine: Routine) -> Fire:
            fire: Fire = LATEST(routine)
            return dataclasses.replace(fire, run_id=old.run_id)

        batch = store.claim_due(T0 + 2 * MINUTE, 100, same_id, TIMERS)
        assert batch.claimed == batch.skipped == batch.buffered == ()
        assert store.get(old.key) == old

    def test_a_manual_claimed_run_blocks_and_buffers(self, store: Store) -> None:
        register(store, next_due_at=T0 + MINUTE)
        manual = store.claim_manual(key_of("r1", "manual:01"), now=T0, expires_at=T0 + HOUR, resend_at=T0 + MINUTE)
        assert manual.won
        rec = _buffer(store, T0 + MINUTE)
        assert rec.state == "buffered"
        assert store.get(key_of("r1", "manual:01")) == manual.record

    def test_a_missed_fire_is_not_buffered(self, store: Store) -> None:
        register(store)
        running(store)
        kept = _buffer(store, T0 + MINUTE)
        missed = buffering(lambda r: dataclasses.replace(fire_due_long(r), missed=True))
        batch = store.claim_due(T0 + 2 * MINUTE, 100, missed, TIMERS)
        assert batch.buffered == () and [(r.state, r.reason) for r in batch.skipped] == [("skipped", "missed")]
        assert store.get(kept.key) == kept

    @pytest.mark.parametrize("ending", sorted(ENDINGS))
    def test_every_terminal_write_of_the_active_run_releases_the_buffered_fire(self, store: Store, ending: str) -> None:
        drive, end = ENDINGS[ending]
        register(store)
        active = drive(store)
        buffered = _buffer(store, T0 + MINUTE)
        at = T0 + 2 * MINUTE
        res = end(store, active, at)
        assert res.won and res.record is not None and res.record.terminal, res
        released = res.released
        assert released is not None and released.key == buffered.key, res
        assert (released.state, released.reason, released.state_at) == ("claimed", None, at)
        # the delay of its claim's first re-send, from the release
        assert buffered.resend_at is not None
        assert released.resend_at == at + (buffered.resend_at - buffered.claimed_at)
        assert store.get(buffered.key) == released
        assert [r.run_id for r in _open(store)] == [buffered.run_id]  # never two at once
        assert store.start(released.key, now=at).won

    def test_start_skipping_the_blocking_run_releases_the_buffered_fire(self, store: Store) -> None:
        register(store, next_due_at=T0 + MINUTE)
        manual = store.claim_manual(key_of("r1", "manual:01"), now=T0, expires_at=T0 + HOUR, resend_at=T0 + MINUTE)
        assert manual.record is not None
        buffered = _buffer(store, T0 + MINUTE)
        store.set_paused(SCOPE, "r1", "operator", now=T0 + MINUTE, next_due_at=None)
        res = store.start(manual.record.key, now=T0 + 2 * MINUTE)
        assert not res.won and res.record is not None and (res.record.state, res.reason) == ("skipped", "paused")
        assert res.released is not None and res.released.key == buffered.key and res.released.state == "claimed"
        later = store.start(buffered.key, now=T0 + 2 * MINUTE)  # the released fire meets the pause too
        assert later.record is not None and (later.record.state, later.reason) == ("skipped", "paused")

    def test_the_expiry_of_a_blocking_manual_run_releases_and_resends_the_buffered_fire(self, store: Store) -> None:
        register(store, next_due_at=T0 + MINUTE)
        manual = store.claim_manual(key_of("r1", "manual:01"), now=T0, expires_at=T0 + 2 * MINUTE, resend_at=T0 + HOUR)
        assert manual.record is not None
        buffered = _buffer(store, T0 + MINUTE)
        got = store.take_resends(T0 + 2 * MINUTE, 100, TIMERS)
        assert [r.key for r in got.expired] == [manual.record.key]
        [sent] = got.resend
        assert sent.key == buffered.key and sent.state == "claimed" and sent.send_attempts == 1
        assert [r.run_id for r in _open(store)] == [buffered.run_id]

    def test_a_release_after_its_window_closed_is_skipped_missed(self, store: Store) -> None:
        register(store)
        active = running(store)
        short = buffering(lambda r: dataclasses.replace(fire_due_long(r), expires_at=T0 + 2 * MINUTE))
        buffered = _buffer(store, T0 + MINUTE, short)
        res = store.finish(active.key, RunResult.completed(), now=T0 + 3 * MINUTE, timers=TIMERS)
        assert res.won and res.released is None
        gone = store.get(buffered.key)
        assert gone is not None and (gone.state, gone.reason) == ("skipped", "missed")
        assert _open(store) == []

    def test_a_buffered_fire_expires_with_its_window(self, store: Store) -> None:
        register(store)
        active = running(store)
        short = buffering(lambda r: dataclasses.replace(fire_due_long(r), expires_at=T0 + 2 * MINUTE))
        buffered = _buffer(store, T0 + MINUTE, short)
        assert [r.key for r in store.peek_resends(T0 + 2 * MINUTE, 100).expired] == [buffered.key]
        got = store.take_resends(T0 + 2 * MINUTE, 100, TIMERS)
        assert [(r.key, r.state, r.reason) for r in got.expired] == [(buffered.key, "skipped", "missed")]
        assert got.resend == ()
        assert store.get(active.key) == active
        res = store.finish(active.key, RunResult.completed(), now=T0 + 3 * MINUTE, timers=TIMERS)
        assert res.won and res.released is None

    def test_the_buffered_row_has_no_owner(self, store: Store) -> None:
        register(store)
        running(store)
        buffered = _buffer(store, T0 + MINUTE)
        lost = store.start(buffered.key, now=T0 + MINUTE)
        assert not lost.won and lost.reason == "duplicate"
        res = store.finish(buffered.key, RunResult("skipped", "operator"), now=T0 + MINUTE, timers=TIMERS)
        assert not res.won and res.reason == "duplicate"
        assert store.get(buffered.key) == buffered

    def test_recording_the_buffered_row_releases_nothing(self, store: Store) -> None:
        register(store)
        active = running(store)
        buffered = _buffer(store, T0 + MINUTE)
        res = store.record(buffered.key, "skipped", "operator", now=T0 + MINUTE)
        assert res.won and res.released is None and res.record is not None
        assert (res.record.state, res.record.reason) == ("skipped", "operator")
        assert store.get(active.key) == active

    def test_the_released_fire_is_the_open_run(self, store: Store) -> None:
        register(store)
        active = running(store)
        buffered = _buffer(store, T0 + MINUTE)
        store.finish(active.key, RunResult.completed(), now=T0 + MINUTE, timers=TIMERS)
        refused = store.claim_manual(
            RunKey.of(SCOPE, "r1", "manual:02"), now=T0 + MINUTE, expires_at=T0 + HOUR, resend_at=T0 + HOUR
        )
        assert not refused.won and refused.reason == "overlap" and refused.record is not None
        assert refused.record.key == buffered.key
        # a newer fire supersedes the released (still claimed) schedule fire, as for any claimed one
        batch = store.claim_due(T0 + 2 * MINUTE, 100, LATEST, TIMERS)
        [new] = batch.claimed
        assert [(r.key, r.state, r.reason) for r in batch.skipped] == [(buffered.key, "skipped", "missed")]
        assert [r.run_id for r in _open(store)] == [new.run_id]

    def test_buffered_rows_are_listed_and_filtered(self, store: Store) -> None:
        register(store)
        running(store)
        buffered = _buffer(store, T0 + MINUTE)
        assert store.list_runs(SCOPE, state="buffered") == [buffered]
        assert store.stuck(T0 + 10 * HOUR, MINUTE) != [] and buffered.key not in [
            r.key for r in store.stuck(T0 + 10 * HOUR, MINUTE)
        ]
