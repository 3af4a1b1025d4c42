"""Contract: reads (ledger, peeks, blocked, stuck, iteration) and system maintenance."""

from __future__ import annotations

from datetime import datetime

from alma_schedule.model import Defer, RunKey, RunResult
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    HOUR,
    MINUTE,
    OTHER_ORG,
    OTHER_UID,
    SCOPE,
    SECOND,
    T0,
    TIMERS,
    claim,
    everything,
    fire_due,
    fire_next_due,
    register,
    run_in,
    running,
)


def _finished(store: Store, routine_id: str, now: datetime, result: RunResult) -> None:
    rec = running(store, routine_id, now=now)
    assert store.finish(rec.key, result, now=now, timers=TIMERS).won


class ReadContract:
    # ------------------------------------------------------------------ the ledger

    def test_list_runs_newest_first_with_filters_and_paging(self, store: Store) -> None:
        register(store, "a")
        for i in range(3):
            _finished(store, "a", T0 + i * MINUTE, RunResult.completed())
        register(store, "b")
        _finished(store, "b", T0, RunResult.failed("runner_error"))
        claim(store, "b", now=T0 + MINUTE)
        runs = store.list_runs(SCOPE)
        assert len(runs) == 5 and runs[0].routine_id == "a" and runs[0].fire_at == T0 + 2 * MINUTE
        keys = [(r.fire_at, r.run_id) for r in runs]
        assert keys == sorted(keys, reverse=True)
        assert [r.fire_at for r in store.list_runs(SCOPE, routine_id="a")] == [
            T0 + 2 * MINUTE,
            T0 + MINUTE,
            T0,
        ]
        assert [r.routine_id for r in store.list_runs(SCOPE, state="failed")] == ["b"]
        assert [r.state for r in store.list_runs(SCOPE, state="claimed")] == ["claimed"]
        assert {r.fire_at for r in store.list_runs(SCOPE, since=T0 + MINUTE)} == {
            T0 + MINUTE,
            T0 + 2 * MINUTE,
        }
        page = store.list_runs(SCOPE, routine_id="a", limit=2)
        assert len(page) == 2
        rest = store.list_runs(SCOPE, routine_id="a", before=(page[-1].fire_at, page[-1].run_id))
        assert [r.fire_at for r in page + rest] == [T0 + 2 * MINUTE, T0 + MINUTE, T0]

    def test_paging_keys_on_fire_run_and_routine_so_a_shared_instant_never_hides_a_row(self, store: Store) -> None:
        for rid in ("a", "b", "c"):  # three routines of one scope, each with a fire at T0 (one run id)
            register(store, rid, next_due_at=T0)
        store.claim_due(T0, 10, fire_next_due(HOUR), TIMERS)
        register(store, "d", next_due_at=T0 + MINUTE)
        claim(store, "d", now=T0 + MINUTE)
        everything_ = store.list_runs(SCOPE)
        assert [(r.fire_at, r.routine_id) for r in everything_] == [
            (T0 + MINUTE, "d"),
            (T0, "c"),
            (T0, "b"),
            (T0, "a"),
        ], "newest first by (fire_at, run_id, routine_id)"
        for size in (1, 2, 3):  # every page boundary, including one between b and a at T0
            seen, before = [], None
            while True:
                page = store.list_runs(SCOPE, limit=size, before=before)
                seen += page
                if len(page) < size:
                    break
                before = (page[-1].fire_at, page[-1].run_id, page[-1].routine_id)
            assert seen == everything_, f"pages of {size}"
        shared = (T0, everything_[1].run_id)  # a pair: every row before it, whatever its routine
        assert [r.routine_id for r in store.list_runs(SCOPE, before=shared)] == []
        assert [r.routine_id for r in store.list_runs(SCOPE, routine_id="b", before=(*shared, "c"))] == ["b"]

    def test_another_scope_cannot_reach_runs(self, store: Store) -> None:
        rec = run_in(store, "running")
        store.annotate(rec.key, {"result_text": "secret", "delivery_hash": "h"})
        store.finish(rec.key, RunResult.completed("delivered"), now=T0, timers=TIMERS)
        for other in (OTHER_ORG, OTHER_UID):
            assert store.get(RunKey.of(other, "r1", rec.run_id)) is None
            assert store.list_runs(other) == []
            assert store.last_completed_delivery(other, "r1") is None
            assert store.erase_results(other) == 0
        kept = store.get(RunKey.of(SCOPE, "r1", rec.run_id))
        assert kept is not None and kept.result_text == "secret"

    def test_last_completed_delivery(self, store: Store) -> None:
        register(store)
        assert store.last_completed_delivery(SCOPE, "r1") is None
        outcomes = [
            (RunResult.completed("delivered"), "h1"),
            (RunResult.completed("delivered"), "h2"),
            (RunResult.completed("suppressed_duplicate"), "h3"),
            (RunResult.completed("delivered"), None),
            (RunResult.failed("sink_error"), "h5"),
        ]
        for i, (result, digest) in enumerate(outcomes):
            rec = running(store, now=T0 + i * MINUTE)
            if digest:
                store.annotate(rec.key, {"delivery_hash": digest})
            store.finish(rec.key, result, now=T0 + i * MINUTE, timers=TIMERS)
        last = store.last_completed_delivery(SCOPE, "r1")
        assert last is not None and last.delivery_hash == "h2" and last.fire_at == T0 + MINUTE

    # ------------------------------------------------------------------ peeks are read-only

    def test_peek_due_is_read_only_and_matches_claim_due(self, store: Store) -> None:
        for rid in ("a", "b", "c"):
            register(store, rid, next_due_at=T0 - MINUTE)
        register(store, "later", next_due_at=T0 + MINUTE)
        before = everything(store)
        first = store.peek_due(T0, 2)
        assert store.peek_due(T0, 2) == first and len(first) == 2
        assert everything(store) == before
        batch = store.claim_due(T0, 2, fire_due, TIMERS)
        assert [r.routine_id for r in first] == [r.routine_id for r in batch.claimed]

    def test_peek_resends_is_read_only_and_matches_take(self, store: Store) -> None:
        register(store, "expiring")
        claim(store, "expiring", decide=fire_due)
        register(store, "resend")
        now = T0 + 5 * MINUTE
        store.claim_due(T0, 10, fire_next_due(window=HOUR), TIMERS)
        before = everything(store)
        peek = store.peek_resends(now, 10)
        assert store.peek_resends(now, 10) == peek
        assert everything(store) == before
        assert [r.routine_id for r in peek.expired] == ["expiring"]
        assert [r.routine_id for r in peek.resend] == ["resend"]
        taken = store.take_resends(now, 10, TIMERS)
        assert [r.key for r in taken.expired] == [r.key for r in peek.expired]
        assert [r.key for r in taken.resend] == [r.key for r in peek.resend]

    def test_peek_polls_is_read_only_and_matches_take(self, store: Store) -> None:
        rec = run_in(store, "submitted")
        before = everything(store)
        peek = store.peek_polls(T0 + HOUR, 10)
        assert store.peek_polls(T0 + HOUR, 10) == peek and [r.key for r in peek] == [rec.key]
        assert everything(store) == before
        assert [r.key for r in store.take_polls(T0 + HOUR, 10, TIMERS)] == [rec.key]

    # ------------------------------------------------------------------ operator views

    def test_list_inactive(self, store: Store) -> None:
        for rid in ("active", "paused", "disabled", "deleted"):
            register(store, rid)
        store.set_paused(SCOPE, "paused", "operator", now=T0, next_due_at=None)
        store.set_enabled(SCOPE, "disabled", False, now=T0, next_due_at=None)
        store.set_paused(SCOPE, "deleted", "operator", now=T0, next_due_at=None)
        store.delete_routine(SCOPE, "deleted", now=T0)
        assert sorted(r.routine_id for r in store.list_inactive()) == ["disabled", "paused"]

    def test_blocked(self, store: Store) -> None:
        limit = TIMERS.run_time_limit
        run_in(store, "claimed", "claimed")
        run_in(store, "running", "running")
        run_in(store, "collecting", "collecting")
        run_in(store, "submitted", "submitted")  # deadline T0 + 1 hour
        assert store.blocked(T0 + 2 * limit, limit) == []
        later = {r.routine_id for r in store.blocked(T0 + 2 * limit + SECOND, limit)}
        assert later == {"running", "collecting"}
        assert {r.routine_id for r in store.blocked(T0 + HOUR + SECOND, limit)} == {
            "running",
            "collecting",
            "submitted",
        }
        assert len(store.blocked(T0 + HOUR + SECOND, limit, limit=2)) == 2

    def test_stuck(self, store: Store) -> None:
        run_in(store, "claimed", "claimed")
        run_in(store, "running", "running")
        run_in(store, "submitted", "submitted")
        assert store.stuck(T0 + MINUTE, HOUR) == []
        assert {r.routine_id for r in store.stuck(T0 + 2 * HOUR, HOUR)} == {"running", "submitted"}

    def test_unstarted_is_a_claimed_run_no_worker_started(self, store: Store) -> None:
        first = run_in(store, "claimed", "claimed")
        run_in(store, "running", "running")
        second = run_in(store, "claimed", "claimed2")
        assert store.unstarted(T0 + MINUTE, MINUTE) == []  # claimed exactly a minute ago: not older
        found = store.unstarted(T0 + 2 * MINUTE, MINUTE, limit=5)
        assert [r.key for r in found] == [first.key, second.key]  # oldest first; a started run is not one
        assert [r.key for r in store.unstarted(T0 + 2 * MINUTE, MINUTE)] == [first.key]  # limit 1 by default

    def test_iter_routines_streams_every_scope_in_key_order(self, store: Store) -> None:
        made = [register(store, rid, scope=scope) for scope in (OTHER_UID, SCOPE, OTHER_ORG) for rid in "zma"]
        got = list(store.iter_routines(batch=2))
        assert [(r.org, r.uid, r.routine_id) for r in got] == sorted((r.org, r.uid, r.routine_id) for r in made)

    # ------------------------------------------------------------------ maintenance

    def test_heartbeat_never_moves_backwards(self, store: Store) -> None:
        assert store.last_tick() is None
        store.heartbeat(T0)
        assert store.last_tick() == T0
        store.heartbeat(T0 - MINUTE)
        assert store.last_tick() == T0
        store.heartbeat(T0 + MINUTE)
        assert store.last_tick() == T0 + MINUTE

    def test_defer_holds_a_routine_back(self, store: Store) -> None:
        register(store)
        # the planning back-off, reached the only way a store is told of it: decide answers Defer
        store.claim_due(T0, 10, lambda r: Defer(T0 + HOUR, "tz database missing"), TIMERS)
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.defer_until == T0 + HOUR and row.last_error == "tz database missing"
        assert store.peek_due(T0, 10) == []
        assert store.claim_due(T0 + HOUR - SECOND, 10, fire_due, TIMERS).claimed == ()
        assert len(store.claim_due(T0 + HOUR, 10, fire_due, TIMERS).claimed) == 1

    def test_prune_deletes_only_old_terminal_runs(self, store: Store) -> None:
        register(store, "old")
        _finished(store, "old", T0, RunResult.completed())
        _finished(store, "old", T0 + HOUR, RunResult.completed())
        store.set_enabled(SCOPE, "old", False, now=T0 + HOUR, next_due_at=None)
        register(store, "live", next_due_at=T0 + 2 * HOUR)
        live = running(store, "live", now=T0 + 2 * HOUR)
        assert store.prune(T0 + MINUTE) == 1
        assert [r.finished_at for r in store.list_runs(SCOPE, routine_id="old")] == [T0 + HOUR]
        assert store.get(RunKey.of(SCOPE, "live", live.run_id)) == live
        assert store.prune(T0 + 10 * HOUR) == 1
        assert store.get(RunKey.of(SCOPE, "live", live.run_id)) == live

    def test_purge_deleted_only_without_non_terminal_runs(self, store: Store) -> None:
        register(store, "done")
        _finished(store, "done", T0, RunResult.completed())
        register(store, "busy")
        busy = running(store, "busy")
        register(store, "alive", next_due_at=None)
        for rid in ("done", "busy"):
            store.delete_routine(SCOPE, rid, now=T0 + MINUTE)
        assert store.purge_deleted() == 1
        assert store.get_routine(SCOPE, "done", include_deleted=True) is None
        assert store.list_runs(SCOPE, routine_id="done") == []
        assert store.routine_versions(SCOPE, "done") == []
        assert store.get_routine(SCOPE, "busy", include_deleted=True) is not None
        assert store.get_routine(SCOPE, "alive") is not None
        store.finish(busy.key, RunResult.completed(), now=T0 + HOUR, timers=TIMERS)
        assert store.purge_deleted() == 1
        assert store.get_routine(SCOPE, "busy", include_deleted=True) is None
        assert store.purge_deleted() == 0

    def test_erase_results_of_a_scope(self, store: Store) -> None:
        mine = run_in(store, "running")
        store.annotate(mine.key, {"result_text": "mine"})
        register(store, "x", scope=OTHER_ORG)
        other = running(store, "x", now=T0)
        store.annotate(other.key, {"result_text": "theirs"})
        assert store.erase_results(SCOPE) == 1
        got = store.get(RunKey.of(SCOPE, "r1", mine.run_id))
        assert got is not None and got.result_text is None
        kept = store.get(RunKey.of(OTHER_ORG, "x", other.run_id))
        assert kept is not None and kept.result_text == "theirs"

    def test_erase_expired_results(self, store: Store) -> None:
        rec = run_in(store, "running")
        store.annotate(rec.key, {"result_text": "text"})
        store.finish(rec.key, RunResult.completed("delivered"), now=T0, timers=TIMERS)
        erase_at = T0 + TIMERS.result_retention
        assert store.erase_expired_results(erase_at - SECOND) == 0
        assert store.erase_expired_results(erase_at) == 1
        got = store.get(RunKey.of(SCOPE, "r1", rec.run_id))
        assert got is not None and got.result_text is None
        assert store.erase_expired_results(erase_at + HOUR) == 0

    def test_reindex_rederives_active_routines(self, store: Store) -> None:
        register(store, "a", next_due_at=T0)
        register(store, "b", next_due_at=T0 + HOUR)
        register(store, "p", next_due_at=T0)
        store.set_paused(SCOPE, "p", "operator", now=T0, next_due_at=None)

        def derive(r: object) -> datetime:
            return T0 + HOUR

        assert store.reindex(derive, tzdata_version="2099a", batch=1) == 1
        a, b, p = (store.get_routine(SCOPE, rid) for rid in ("a", "b", "p"))
        assert a is not None and b is not None and p is not None
        assert (a.next_due_at, b.next_due_at, p.next_due_at) == (T0 + HOUR, T0 + HOUR, None)
        assert a.tzdata_version == "2099a"
        assert store.reindex(derive) == 0
