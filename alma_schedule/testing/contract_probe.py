"""Contract: the tick probe (``probe_tick``): each flag is true exactly when its step of the tick
would do something: the step's own selection (its peek, or the step itself) is non-empty."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Backfill, Defer, RunResult, TickProbe
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    SCOPE,
    SECOND,
    T0,
    TIMERS,
    register,
    run_in,
)

LIMIT = TIMERS.run_time_limit
FLAGS = tuple(f.name for f in dataclasses.fields(TickProbe))


def _probe(store: Store, now: datetime) -> TickProbe:
    return store.probe_tick(now, LIMIT)


class ProbeContract:
    def test_an_empty_store_has_nothing_to_do(self, store: Store) -> None:
        got = _probe(store, T0)
        assert [name for name in FLAGS if getattr(got, name)] == []

    def test_due_is_the_claim_due_selection(self, store: Store) -> None:
        register(store, "later", next_due_at=T0 + MINUTE)
        register(store, "held", next_due_at=T0 - MINUTE)
        store.claim_due(T0 - MINUTE, 10, lambda r: Defer(T0 + HOUR, "flaky"), TIMERS)  # held back to T0 + 1h
        register(store, "off", next_due_at=T0 - HOUR)
        store.set_enabled(SCOPE, "off", False, now=T0, next_due_at=None)
        register(store, "gone", next_due_at=T0 - HOUR)
        store.delete_routine(SCOPE, "gone", now=T0)
        for at, due in ((T0, False), (T0 + MINUTE - SECOND, False), (T0 + MINUTE, True), (T0 + HOUR, True)):
            assert _probe(store, at).due is due, at
            assert bool(store.peek_due(at, 1)) is due, at
        store.claim_due(T0 + MINUTE, 10, lambda r: Defer(T0 + 2 * HOUR, "flaky"), TIMERS)
        assert _probe(store, T0 + MINUTE).due is False  # both held back now
        assert _probe(store, T0 + 2 * HOUR).due is True

    def test_backfills_is_a_pending_backfill(self, store: Store) -> None:
        register(store, "r5", next_due_at=T0 + HOUR, last_fire=T0 - 10 * MINUTE)
        assert _probe(store, T0).backfills is False
        store.put_backfill(Backfill(SCOPE.org, SCOPE.uid, "r5", T0 - HOUR, T0, T0 - HOUR, 100), now=T0)
        assert _probe(store, T0).backfills is True
        store.cancel_backfill(SCOPE, "r5", now=T0)
        assert _probe(store, T0).backfills is False

    def test_resends_and_expiries_are_the_take_resends_selections(self, store: Store) -> None:
        rec = run_in(store, "claimed")
        assert rec.resend_at is not None and rec.resend_at < rec.expires_at
        for at in (T0, rec.resend_at - SECOND, rec.resend_at, rec.expires_at - SECOND, rec.expires_at):
            peek = store.peek_resends(at, 1)
            got = _probe(store, at)
            assert (got.resends, got.expiries) == (bool(peek.resend), bool(peek.expired)), at
        assert (_probe(store, rec.resend_at).resends, _probe(store, rec.resend_at).expiries) == (True, False)
        assert (_probe(store, rec.expires_at).resends, _probe(store, rec.expires_at).expiries) == (False, True)
        store.take_resends(rec.expires_at, 10, TIMERS)
        assert _probe(store, rec.expires_at + HOUR).expiries is False

    def test_a_taken_resend_is_not_due_until_its_next_resend(self, store: Store) -> None:
        rec = run_in(store, "claimed")
        assert rec.resend_at is not None
        store.take_resends(rec.resend_at, 10, TIMERS)
        assert _probe(store, rec.resend_at).resends is False

    def test_polls_is_the_take_polls_selection(self, store: Store) -> None:
        rec = run_in(store, "submitted")
        assert rec.next_poll_at is not None
        for at, due in ((T0, False), (rec.next_poll_at - SECOND, False), (rec.next_poll_at, True)):
            assert _probe(store, at).polls is due, at
            assert bool(store.peek_polls(at, 1)) is due, at
        assert store.take_polls(rec.next_poll_at, 10, TIMERS)
        assert _probe(store, rec.next_poll_at).polls is False

    def test_expired_results_is_what_erase_expired_results_erases(self, store: Store) -> None:
        rec = run_in(store, "running")
        store.annotate(rec.key, {"result_text": "text"})
        store.finish(rec.key, RunResult.completed("delivered"), now=T0, timers=TIMERS)
        erase_at = T0 + TIMERS.result_retention
        assert _probe(store, erase_at - SECOND).expired_results is False
        assert store.erase_expired_results(erase_at - SECOND) == 0
        assert _probe(store, erase_at).expired_results is True
        assert store.erase_expired_results(erase_at) == 1
        assert _probe(store, erase_at).expired_results is False

    def test_a_run_marked_for_erasure_without_a_text_has_its_mark_cleared(self, store: Store) -> None:
        """``erase_at`` alone (annotated with no result text): the probe and the erasure agree on it,
        and the erasure clears the mark, so it is not found again at every tick."""
        rec = run_in(store, "running")
        erase_at = T0 + TIMERS.result_retention
        store.annotate(rec.key, {"erase_at": erase_at})
        store.finish(rec.key, RunResult.completed("delivered"), now=T0, timers=TIMERS)
        assert _probe(store, erase_at).expired_results is True
        assert store.erase_expired_results(erase_at) == 1
        got = store.get(rec.key)
        assert got is not None and got.erase_at is None and got.result_text is None
        assert _probe(store, erase_at).expired_results is False

    def test_purge_is_what_purge_deleted_removes(self, store: Store) -> None:
        busy = run_in(store, "running", "busy")
        store.delete_routine(SCOPE, "busy", now=T0)
        assert _probe(store, T0).purge is False  # its run is open
        assert store.purge_deleted() == 0
        store.finish(busy.key, RunResult.completed(), now=T0 + MINUTE, timers=TIMERS)
        assert _probe(store, T0).purge is True
        assert store.purge_deleted() == 1
        assert _probe(store, T0).purge is False

    def test_blocked_is_the_blocked_list(self, store: Store) -> None:
        rec = run_in(store, "running")
        old = T0 + 2 * LIMIT
        for at in (T0 + SECOND, old, old + SECOND):
            assert _probe(store, at).blocked is bool(store.blocked(at, LIMIT, 1)), at
        assert (_probe(store, old).blocked, _probe(store, old + SECOND).blocked) == (False, True)
        assert store.mark_blocked(rec.key, why="uncertain_outcome", now=T0 + SECOND)
        assert _probe(store, T0 + SECOND).blocked is True  # marked: at once

    def test_blocked_includes_a_submitted_run_past_its_deadline(self, store: Store) -> None:
        rec = run_in(store, "submitted")
        assert rec.deadline is not None
        assert _probe(store, rec.deadline).blocked is False
        assert _probe(store, rec.deadline + SECOND).blocked is True
        assert bool(store.blocked(rec.deadline + SECOND, LIMIT, 1)) is True

    def test_erroring_is_the_erroring_list(self, store: Store) -> None:
        register(store, "bad", next_due_at=T0)
        store.claim_due(T0, 10, lambda r: Defer(T0 + MINUTE, "flaky"), TIMERS)
        assert _probe(store, T0).erroring is True and store.erroring(1).count == 1
        store.delete_routine(SCOPE, "bad", now=T0)
        assert _probe(store, T0).erroring is False and store.erroring(1).count == 0

    def test_the_probe_writes_nothing_and_refuses_bad_input(self, store: Store) -> None:
        run_in(store, "running")
        before = list(store.iter_routines()), store.list_runs(SCOPE)
        _probe(store, T0 + HOUR)
        assert (list(store.iter_routines()), store.list_runs(SCOPE)) == before
        with pytest.raises(InvalidInput):
            store.probe_tick(T0.replace(tzinfo=None), LIMIT)
        with pytest.raises(InvalidInput):
            store.probe_tick(T0, -SECOND)
