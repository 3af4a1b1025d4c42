"""Contract: routine writes and reads (register, re-register, levers, delete, scope isolation)."""

from __future__ import annotations

import dataclasses

import pytest

from alma_schedule.errors import NotFound, RegistrationRefused, StoreConflict
from alma_schedule.model import RunKey, RunResult
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    MINUTE,
    OTHER_ORG,
    OTHER_UID,
    REGISTERED,
    SCOPE,
    T0,
    TIMERS,
    claim,
    cycle,
    make_routine,
    register,
    running,
)


class RoutineContract:
    # ------------------------------------------------------------------ put_routine

    def test_put_routine_inserts_and_reads_back(self, store: Store) -> None:
        given = make_routine("r1", definition={"text": "hi", "n": [1, 2.5, None, True]})
        saved = store.put_routine(given, now=REGISTERED)
        for name in ("org", "uid", "routine_id", "kind", "config_revision", "registered_at", "next_due_at"):
            assert getattr(saved, name) == getattr(given, name), name
        assert dict(saved.schedule) == {"every": 60}
        assert dict(saved.definition) == {"text": "hi", "n": [1, 2.5, None, True]}
        assert saved.enabled and saved.paused_reason is None and saved.deleted_at is None
        assert saved.consecutive_failures == 0 and saved.last_fire is None
        assert saved.created_at == REGISTERED
        assert store.get_routine(SCOPE, "r1") == saved
        assert store.list_routines(SCOPE) == [saved]
        [version] = store.routine_versions(SCOPE, "r1")
        assert version.config_revision == given.config_revision
        assert dict(version.definition) == dict(given.definition)
        assert version.created_at == REGISTERED

    def test_returned_bodies_are_copies(self, store: Store) -> None:
        saved = register(store)
        saved.definition["text"] = "mutated"  # type: ignore[index]
        again = store.get_routine(SCOPE, "r1")
        assert again is not None and dict(again.definition) == {"text": "hello"}

    def test_put_routine_needs_the_current_revision(self, store: Store) -> None:
        first = register(store)
        changed = make_routine("r1", definition={"text": "v2"})
        with pytest.raises(StoreConflict):
            store.put_routine(changed, now=T0)  # expected None, but the row exists
        with pytest.raises(StoreConflict):
            store.put_routine(changed, now=T0, expected_revision="not-the-revision")
        with pytest.raises(StoreConflict):
            store.put_routine(make_routine("r2"), now=T0, expected_revision=first.config_revision)
        assert store.get_routine(SCOPE, "r1") == first
        assert store.get_routine(SCOPE, "r2") is None
        saved = store.put_routine(changed, now=T0, expected_revision=first.config_revision)
        assert saved.config_revision == changed.config_revision
        assert dict(saved.definition) == {"text": "v2"}

    def test_unchanged_revision_appends_no_version(self, store: Store) -> None:
        first = register(store)
        again = store.put_routine(make_routine("r1"), now=T0, expected_revision=first.config_revision)
        assert again.config_revision == first.config_revision
        assert len(store.routine_versions(SCOPE, "r1")) == 1

    def test_changed_revision_appends_a_version(self, store: Store) -> None:
        first = register(store)
        second = make_routine(
            "r1", schedule={"every": 120}, registered_at=T0, last_fire=T0, next_due_at=T0 + 2 * MINUTE
        )
        saved = store.put_routine(second, now=T0, expected_revision=first.config_revision)
        assert (saved.registered_at, saved.last_fire, saved.next_due_at) == (T0, T0, T0 + 2 * MINUTE)
        assert saved.created_at == first.created_at
        versions = store.routine_versions(SCOPE, "r1")
        assert [v.config_revision for v in versions] == [first.config_revision, second.config_revision]
        assert dict(versions[1].schedule) == {"every": 120}
        assert versions[1].created_at == T0

    def test_reregister_keeps_levers_and_streak(self, store: Store) -> None:
        first = register(store, next_due_at=T0)
        cycle(store, RunResult.failed("runner_error"))
        store.set_paused(SCOPE, "r1", "operator", now=T0 + MINUTE, next_due_at=None)
        store.set_enabled(SCOPE, "r1", False, now=T0 + MINUTE, next_due_at=None)
        changed = make_routine("r1", definition={"text": "v2"}, next_due_at=T0 + 5 * MINUTE)
        saved = store.put_routine(changed, now=T0 + 2 * MINUTE, expected_revision=first.config_revision)
        assert saved.paused_reason == "operator" and saved.enabled is False
        assert saved.consecutive_failures == 1
        assert saved.next_due_at is None, "next_due_at must stay NULL while paused or disabled"

    # ------------------------------------------------------------------ tombstones

    def test_tombstoned_id_with_a_nonterminal_run_is_refused(self, store: Store) -> None:
        register(store)
        rec = claim(store)
        store.delete_routine(SCOPE, "r1", now=T0)
        with pytest.raises(RegistrationRefused) as info:
            store.put_routine(make_routine("r1", definition={"text": "new"}), now=T0)
        blocking = info.value.blocking_run
        assert blocking is not None and blocking.run_id == rec.run_id
        assert rec.run_id in str(info.value)
        after = store.get_routine(SCOPE, "r1", include_deleted=True)
        assert after is not None and after.deleted_at == T0 and dict(after.definition) == {"text": "hello"}

    def test_reregister_clears_the_tombstone(self, store: Store) -> None:
        first = register(store)
        rec = running(store)
        store.finish(rec.key, RunResult.failed("runner_error"), now=T0, timers=TIMERS)
        store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        store.delete_routine(SCOPE, "r1", now=T0)
        with pytest.raises(StoreConflict):
            store.put_routine(make_routine("r1"), now=T0, expected_revision=first.config_revision)
        fresh = store.put_routine(make_routine("r1", next_due_at=T0 + HOUR_), now=T0 + MINUTE)
        assert fresh.deleted_at is None and fresh.enabled and fresh.paused_reason is None
        assert fresh.consecutive_failures == 0 and fresh.next_due_at == T0 + HOUR_
        assert store.get_routine(SCOPE, "r1") == fresh
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) is not None, "old runs stay in the ledger"

    # ------------------------------------------------------------------ levers

    def test_pause_keeps_the_first_reason(self, store: Store) -> None:
        register(store)
        paused = store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        assert paused.paused_reason == "operator" and paused.next_due_at is None
        again = store.set_paused(SCOPE, "r1", "failure_streak:runner_error", now=T0 + MINUTE, next_due_at=None)
        assert again.paused_reason == "operator"
        assert store.peek_due(T0 + HOUR_, 10) == []

    def test_resume_restarts_cursor_and_resets_streak(self, store: Store) -> None:
        register(store)
        cycle(store, RunResult.failed("runner_error"))
        store.set_paused(SCOPE, "r1", "operator", now=T0 + MINUTE, next_due_at=None)
        t1 = T0 + HOUR_
        resumed = store.set_paused(SCOPE, "r1", None, now=t1, next_due_at=t1 + MINUTE)
        assert resumed.paused_reason is None and resumed.consecutive_failures == 0
        assert resumed.last_fire == t1 and resumed.next_due_at == t1 + MINUTE

    def test_resume_while_disabled_keeps_next_due_null(self, store: Store) -> None:
        register(store)
        store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        store.set_enabled(SCOPE, "r1", False, now=T0, next_due_at=None)
        resumed = store.set_paused(SCOPE, "r1", None, now=T0 + MINUTE, next_due_at=T0 + 2 * MINUTE)
        assert resumed.paused_reason is None and resumed.enabled is False
        assert resumed.next_due_at is None and resumed.last_fire == T0 + MINUTE

    def test_disable_then_enable_restarts_cursor(self, store: Store) -> None:
        register(store)
        cycle(store, RunResult.failed("runner_error"))
        off = store.set_enabled(SCOPE, "r1", False, now=T0 + MINUTE, next_due_at=None)
        assert off.enabled is False and off.next_due_at is None
        assert store.peek_due(T0 + HOUR_, 10) == []
        t1 = T0 + HOUR_
        on = store.set_enabled(SCOPE, "r1", True, now=t1, next_due_at=t1 + MINUTE)
        assert on.enabled and on.last_fire == t1 and on.next_due_at == t1 + MINUTE
        assert on.consecutive_failures == 0

    def test_enable_while_paused_keeps_next_due_null(self, store: Store) -> None:
        register(store)
        store.set_enabled(SCOPE, "r1", False, now=T0, next_due_at=None)
        store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        on = store.set_enabled(SCOPE, "r1", True, now=T0 + MINUTE, next_due_at=T0 + 2 * MINUTE)
        assert on.enabled and on.paused_reason == "operator" and on.next_due_at is None

    def test_levers_on_unknown_or_deleted_ids_are_not_found(self, store: Store) -> None:
        register(store)
        store.delete_routine(SCOPE, "r1", now=T0)
        for rid in ("r1", "nope"):
            with pytest.raises(NotFound):
                store.set_paused(SCOPE, rid, "operator", now=T0, next_due_at=None)
            with pytest.raises(NotFound):
                store.set_enabled(SCOPE, rid, False, now=T0, next_due_at=None)
        with pytest.raises(NotFound):
            store.delete_routine(SCOPE, "nope", now=T0)

    # ------------------------------------------------------------------ delete, list

    def test_delete_is_a_tombstone_and_idempotent(self, store: Store) -> None:
        register(store)
        gone = store.delete_routine(SCOPE, "r1", now=T0)
        assert gone.deleted_at == T0 and gone.next_due_at is None
        assert store.get_routine(SCOPE, "r1") is None
        assert store.list_routines(SCOPE) == []
        kept = store.get_routine(SCOPE, "r1", include_deleted=True)
        assert kept is not None and kept.deleted_at == T0
        assert store.list_routines(SCOPE, include_deleted=True) == [kept]
        again = store.delete_routine(SCOPE, "r1", now=T0 + MINUTE)
        assert again.deleted_at == T0
        assert store.peek_due(T0 + HOUR_, 10) == []

    def test_list_routines_orders_by_id_and_pages(self, store: Store) -> None:
        ids = ["b", "B", "a", "\u00e9t\u00e9", "a b", "a-b", "A", "\u2603"]
        for rid in ids:
            register(store, rid)
        expected = sorted(ids)  # code point order (C collation)
        assert [r.routine_id for r in store.list_routines(SCOPE)] == expected
        page1 = store.list_routines(SCOPE, limit=3)
        page2 = store.list_routines(SCOPE, limit=3, after=page1[-1].routine_id)
        assert [r.routine_id for r in page1 + page2] == expected[:6]

    # ------------------------------------------------------------------ scope isolation

    def test_another_scope_cannot_reach_a_routine(self, store: Store) -> None:
        mine = register(store)
        for other in (OTHER_ORG, OTHER_UID):
            assert store.get_routine(other, "r1", include_deleted=True) is None
            assert store.list_routines(other, include_deleted=True) == []
            assert store.routine_versions(other, "r1") == []
            with pytest.raises(NotFound):
                store.set_paused(other, "r1", "operator", now=T0, next_due_at=None)
            with pytest.raises(NotFound):
                store.set_enabled(other, "r1", False, now=T0, next_due_at=None)
            with pytest.raises(NotFound):
                store.delete_routine(other, "r1", now=T0)
            res = store.claim_manual(
                RunKey.of(other, "r1", "manual:1"), now=T0, expires_at=T0 + HOUR_, resend_at=T0 + MINUTE
            )
            assert (res.won, res.reason, res.record) == (False, "not_found", None)
        assert store.get_routine(SCOPE, "r1") == mine
        twin = store.put_routine(dataclasses.replace(make_routine("r1", scope=OTHER_ORG), kind="other"), now=T0)
        assert twin.kind == "other" and store.get_routine(SCOPE, "r1") == mine


HOUR_ = 60 * MINUTE
