"""Contract: the audit trail (``routine_events``). Every operator write appends one event in its own
transaction (who, when, what, the diff); a no-op appends nothing; a bad actor writes nothing; scope
rules hold; events survive the purge; an erasure blanks their payloads; the retention prunes in bounds.
docs/architecture.md, section "The modules, in detail" (testing/contract_events.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Backfill, RunKey, RunResult
from alma_schedule.model.events import RoutineEvent
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    MINUTE,
    OTHER_ORG,
    OTHER_UID,
    REGISTERED,
    SCOPE,
    T0,
    claim,
    cycle,
    make_routine,
    register,
    running,
    with_threshold,
)

ALICE = "alice@host"


def _events(store: Store, routine_id: str = "r1") -> list[RoutineEvent]:
    return store.routine_events(SCOPE, routine_id)


def _manual(store: Store, actor: str | None = ALICE) -> RunKey:
    key = RunKey.of(SCOPE, "r1", "manual:01HZZZZZZZZZZZZZZZZZZZZZZZ")
    res = store.claim_manual(key, now=T0, expires_at=T0 + MINUTE, resend_at=T0 + MINUTE, actor=actor)
    assert res.won
    return key


class EventsContract:
    def test_register_then_update_records_the_actor_and_the_diff(self, store: Store) -> None:
        store.put_routine(make_routine(), now=REGISTERED, actor=ALICE)
        saved = store.get_routine(SCOPE, "r1")
        assert saved is not None
        changed = make_routine(schedule={"every": 120})
        store.put_routine(changed, now=T0, expected_revision=saved.config_revision, actor="bob@cli")
        newest, first = _events(store)
        assert (first.action, first.actor, first.at) == ("register", ALICE, REGISTERED)
        assert first.diff is not None and first.diff["schedule"] == {"before": None, "after": {"every": 60}}
        assert (newest.action, newest.actor, newest.at) == ("update", "bob@cli", T0)
        assert newest.diff == {"schedule": {"before": {"every": 60}, "after": {"every": 120}}}
        assert newest.event_id > first.event_id and (newest.org, newest.uid, newest.routine_id) == (
            "org-a",
            "user-1",
            "r1",
        )

    def test_an_identical_re_registration_appends_nothing(self, store: Store) -> None:
        saved = register(store)
        store.put_routine(make_routine(), now=T0, expected_revision=saved.config_revision, actor=ALICE)
        assert [e.action for e in _events(store)] == ["register"]

    def test_each_lever_appends_one_event_and_a_no_op_none(self, store: Store) -> None:
        register(store)
        store.set_paused(SCOPE, "r1", "manual", now=T0, next_due_at=None, actor=ALICE)
        store.set_paused(SCOPE, "r1", "again", now=T0, next_due_at=None, actor=ALICE)  # the first reason wins
        store.set_paused(SCOPE, "r1", None, now=T0 + MINUTE, next_due_at=T0 + 2 * MINUTE, actor="api")
        store.set_paused(SCOPE, "r1", None, now=T0 + MINUTE, next_due_at=T0 + 2 * MINUTE, actor="api")
        store.set_enabled(SCOPE, "r1", False, now=T0 + 2 * MINUTE, next_due_at=None, actor=ALICE)
        store.set_enabled(SCOPE, "r1", False, now=T0 + 2 * MINUTE, next_due_at=None, actor=ALICE)
        store.set_enabled(SCOPE, "r1", True, now=T0 + 3 * MINUTE, next_due_at=T0 + 4 * MINUTE, actor=ALICE)
        store.delete_routine(SCOPE, "r1", now=T0 + 4 * MINUTE, actor=ALICE)
        store.delete_routine(SCOPE, "r1", now=T0 + 5 * MINUTE, actor=ALICE)
        events = list(reversed(_events(store)))
        assert [e.action for e in events] == ["register", "pause", "resume", "disable", "enable", "delete"]
        pause, resume = events[1], events[2]
        assert (pause.actor, pause.reason) == (ALICE, "manual")
        assert pause.diff == {"paused_reason": {"before": None, "after": "manual"}}
        assert (resume.actor, resume.diff) == ("api", {"paused_reason": {"before": "manual", "after": None}})
        assert events[3].diff == {"enabled": {"before": True, "after": False}}
        assert events[5].diff == {"deleted_at": {"before": None, "after": (T0 + 4 * MINUTE).isoformat()}}

    def test_trigger_record_and_backfill_append_their_events(self, store: Store) -> None:
        register(store)
        key = _manual(store)
        store.record(key, "completed", "reconciled", now=T0 + MINUTE, actor="ops@host")
        span = Backfill(SCOPE.org, SCOPE.uid, "r1", T0 - 50 * MINUTE, T0 - 30 * MINUTE, T0 - 50 * MINUTE, 10)
        store.put_backfill(span, now=T0 + 2 * MINUTE, actor=ALICE)
        store.cancel_backfill(SCOPE, "r1", now=T0 + 3 * MINUTE, actor=ALICE)
        store.cancel_backfill(SCOPE, "r1", now=T0 + 4 * MINUTE, actor=ALICE)  # nothing pending: no event
        events = list(reversed(_events(store)))
        assert [e.action for e in events] == ["register", "trigger", "record", "backfill", "cancel_backfill"]
        assert (events[1].actor, events[1].reason, events[1].diff) == (ALICE, key.run_id, {})
        assert events[2].actor == "ops@host" and events[2].reason is not None and "reconciled" in events[2].reason

    def test_a_refused_trigger_appends_nothing(self, store: Store) -> None:
        register(store)
        store.set_paused(SCOPE, "r1", "manual", now=T0, next_due_at=None)
        key = RunKey.of(SCOPE, "r1", "manual:01HZZZZZZZZZZZZZZZZZZZZZZZ")
        assert not store.claim_manual(key, now=T0, expires_at=T0 + MINUTE, resend_at=T0 + MINUTE, actor=ALICE).won
        assert [e.action for e in _events(store)] == ["pause", "register"]

    @pytest.mark.parametrize("actor", ["x" * 201, "alice\n@host", "bell\x07", "", 7])
    def test_a_bad_actor_is_refused_naming_the_field_and_writes_nothing(self, store: Store, actor: object) -> None:
        with pytest.raises(InvalidInput, match="actor"):
            store.put_routine(make_routine(), now=REGISTERED, actor=actor)  # type: ignore[arg-type]
        assert store.get_routine(SCOPE, "r1") is None
        register(store)
        with pytest.raises(InvalidInput, match="actor"):
            store.set_paused(SCOPE, "r1", "manual", now=T0, next_due_at=None, actor=actor)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="actor"):
            store.delete_routine(SCOPE, "r1", now=T0, actor=actor)  # type: ignore[arg-type]
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.paused_reason is None
        assert [e.action for e in _events(store)] == ["register"]

    def test_an_actor_of_200_characters_is_kept(self, store: Store) -> None:
        store.put_routine(make_routine(), now=REGISTERED, actor="é" * 200)
        assert _events(store)[0].actor == "é" * 200

    def test_a_scoped_read_never_sees_another_scopes_events(self, store: Store) -> None:
        register(store)
        register(store, scope=OTHER_ORG)
        store.set_paused(OTHER_ORG, "r1", "theirs", now=T0, next_due_at=None, actor="them@host")
        assert [e.action for e in _events(store)] == ["register"]
        assert [e.action for e in store.routine_events(OTHER_ORG, "r1")] == ["pause", "register"]
        assert store.routine_events(OTHER_UID, "r1") == []

    def test_events_survive_the_purge_of_a_deleted_routine(self, store: Store) -> None:
        register(store)
        store.delete_routine(SCOPE, "r1", now=T0, actor=ALICE)
        assert store.purge_deleted() == 1
        assert store.get_routine(SCOPE, "r1", include_deleted=True) is None
        assert [e.action for e in _events(store)] == ["delete", "register"]

    def test_an_erasure_blanks_the_payloads_and_keeps_who_and_when(self, store: Store) -> None:
        register(store)
        store.set_paused(SCOPE, "r1", "customer said stop", now=T0, next_due_at=None, actor=ALICE)
        register(store, scope=OTHER_ORG)
        store.erase_results(SCOPE)
        pause, reg = _events(store)
        assert (pause.actor, pause.at, pause.action, pause.reason, pause.diff) == (ALICE, T0, "pause", None, None)
        assert reg.diff is None
        theirs = store.routine_events(OTHER_ORG, "r1")
        assert theirs[0].diff is not None  # another scope's payloads stay

    def test_the_retention_prunes_the_oldest_in_bounded_batches(self, store: Store) -> None:
        register(store)
        for i in range(4):
            at = T0 + timedelta(hours=i)
            store.set_paused(SCOPE, "r1", f"p{i}", now=at, next_due_at=None, actor=ALICE)
            store.set_paused(SCOPE, "r1", None, now=at + MINUTE, next_due_at=None, actor=ALICE)
        assert len(_events(store)) == 9
        assert store.prune_events(T0 + timedelta(hours=2), limit=3) == 3  # the register and the first pair
        assert [e.reason for e in reversed(_events(store))][:2] == ["p1", None]
        assert store.prune_events(T0 + timedelta(hours=2), limit=3) == 2
        assert store.prune_events(T0 + timedelta(hours=2), limit=3) == 0
        assert len(_events(store)) == 4
        assert store.prune_events(T0 + timedelta(days=1), limit=0) == 0

    def test_the_history_read_is_bounded(self, store: Store) -> None:
        register(store)
        store.set_paused(SCOPE, "r1", "manual", now=T0, next_due_at=None)
        assert [e.action for e in store.routine_events(SCOPE, "r1", limit=1)] == ["pause"]
        assert _events(store, "nobody") == []

    def test_the_ticks_claims_append_nothing(self, store: Store) -> None:
        register(store)
        claim(store)
        assert [e.action for e in _events(store)] == ["register"]

    def test_the_streaks_automatic_pause_is_an_event_by_streak(self, store: Store) -> None:
        register(store)
        timers = with_threshold(2)
        cycle(store, RunResult.failed("provider_error"), timers=timers)
        assert [e.action for e in _events(store)] == ["register"]  # a counted failure alone: no event
        cycle(store, RunResult.failed("sink_error"), timers=timers)
        latched, _ = _events(store)
        assert (latched.action, latched.actor, latched.reason) == ("pause", "streak", "failure_streak:sink_error")
        assert latched.diff == {"paused_reason": {"before": None, "after": "failure_streak:sink_error"}}

    def test_a_failure_on_an_operators_pause_appends_no_streak_event(self, store: Store) -> None:
        register(store)
        rec = running(store)
        store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None, actor=ALICE)
        store.finish(rec.key, RunResult.failed("runner_error"), now=T0, timers=with_threshold(1))
        assert [(e.action, e.actor) for e in _events(store)] == [("pause", ALICE), ("register", None)]
