"""Contract: run transitions along EDGES (start, submit, collect, annotate, finish, record).

The failure streak that ``finish`` moves is in :mod:`alma_schedule.testing.contract_streak`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from alma_schedule.errors import InvalidInput, NotFound
from alma_schedule.model import Ceiling, RunKey, RunRecord, RunResult
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    DAY,
    HOUR,
    MINUTE,
    OTHER_ORG,
    SCOPE,
    SECOND,
    T0,
    TIMERS,
    claim,
    everything,
    fire_due_long,
    key_of,
    register,
    run_in,
    running,
    with_threshold,
)

Op = Callable[[Store, RunRecord], object]
ORG_CEILING = Ceiling.org_key(SCOPE.org)

#: Every guarded write, as (name, call). Each is applied to rows in states it must NOT move.
OPS: dict[str, Op] = {
    "start": lambda s, r: s.start(r.key, now=T0 + MINUTE),
    "submit": lambda s, r: s.submit(r.key, now=T0 + MINUTE, batch_id="b", deadline=T0 + HOUR, next_poll_at=T0 + HOUR),
    "begin_collecting": lambda s, r: s.begin_collecting(r.key, now=T0 + MINUTE),
    "completed": lambda s, r: s.finish(r.key, RunResult.completed(), now=T0 + MINUTE, timers=TIMERS),
    "failed": lambda s, r: s.finish(r.key, RunResult.failed("runner_error"), now=T0 + MINUTE, timers=TIMERS),
    "refused": lambda s, r: s.finish(r.key, RunResult.refused("not_admitted"), now=T0 + MINUTE, timers=TIMERS),
    "skipped": lambda s, r: s.finish(r.key, RunResult("skipped", "missed"), now=T0 + MINUTE, timers=TIMERS),
    "timed_out": lambda s, r: s.finish(r.key, RunResult.timed_out(), now=T0 + MINUTE, timers=TIMERS),
}
#: The state each op moves a row INTO, and the states it may come from (the state table of docs/architecture.md).
ALLOWED: dict[str, set[str]] = {
    "start": {"claimed"},
    "submit": {"running"},
    "begin_collecting": {"submitted"},
    "completed": {"running", "collecting"},
    "failed": {"running", "submitted", "collecting"},
    "refused": {"running"},
    "skipped": {"claimed"},
    "timed_out": {"submitted"},
}
RIGHT = [(op, state) for op, states in ALLOWED.items() for state in sorted(states) if op != "start"]
WRONG = [
    (op, state)
    for op in OPS
    for state in ("claimed", "running", "submitted", "collecting", "completed")
    if state not in ALLOWED[op]
]


def _terminal(store: Store) -> RunRecord:
    register(store)
    rec = running(store)
    res = store.finish(rec.key, RunResult.completed(), now=T0, timers=TIMERS)
    assert res.record is not None
    return res.record


def _in(store: Store, state: str) -> RunRecord:
    return _terminal(store) if state == "completed" else run_in(store, state)


class RunContract:
    # ------------------------------------------------------------------ start

    def test_start_wins_once(self, store: Store) -> None:
        register(store)
        rec = claim(store)
        won = store.start(rec.key, now=T0 + SECOND)
        assert (won.won, won.reason) == (True, "won") and won.record is not None
        assert (won.record.state, won.record.started_at, won.record.state_at) == (
            "running",
            T0 + SECOND,
            T0 + SECOND,
        )
        again = store.start(rec.key, now=T0 + 2 * SECOND)
        assert (again.won, again.reason, again.record) == (False, "duplicate", won.record)
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == won.record

    def test_start_unknown_run(self, store: Store) -> None:
        register(store)
        res = store.start(key_of("r1", "2026-03-01T12:00:00Z"), now=T0)
        assert (res.won, res.reason, res.record) == (False, "not_found", None)

    def test_start_after_supersession_loses(self, store: Store) -> None:
        register(store)
        old = claim(store)
        store.claim_due(T0 + MINUTE, 10, fire_due_long, TIMERS)
        res = store.start(old.key, now=T0 + MINUTE)
        assert (res.won, res.reason) == (False, "superseded")
        assert res.record is not None and (res.record.state, res.record.reason) == ("skipped", "missed")

    @pytest.mark.parametrize("lever", ["paused", "disabled", "deleted"])
    def test_start_on_an_inactive_routine_skips(self, store: Store, lever: str) -> None:
        register(store)
        rec = claim(store)
        if lever == "paused":
            store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        elif lever == "disabled":
            store.set_enabled(SCOPE, "r1", False, now=T0, next_due_at=None)
        else:
            store.delete_routine(SCOPE, "r1", now=T0)
        res = store.start(rec.key, now=T0 + SECOND)
        assert (res.won, res.reason) == (False, lever)
        assert res.record is not None and (res.record.state, res.record.reason) == ("skipped", lever)
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == res.record
        assert store.start(rec.key, now=T0 + 2 * SECOND).won is False

    # ------------------------------------------------------------------ submit / collect

    def test_submit_then_collect_one_winner(self, store: Store) -> None:
        rec = run_in(store, "running")
        sub = store.submit(
            rec.key,
            now=T0 + SECOND,
            batch_id="b-1",
            deadline=T0 + HOUR,
            next_poll_at=T0 + 30 * SECOND,
            target_task_id="task-9",
        )
        assert sub.won and sub.record is not None
        got = sub.record
        assert (
            got.state,
            got.batch_id,
            got.target_task_id,
            got.deadline,
            got.next_poll_at,
            got.submitted_at,
        ) == (
            "submitted",
            "b-1",
            "task-9",
            T0 + HOUR,
            T0 + 30 * SECOND,
            T0 + SECOND,
        )
        dup = store.submit(rec.key, now=T0 + SECOND, batch_id="b-2", deadline=T0, next_poll_at=T0)
        assert (dup.won, dup.reason, dup.record) == (False, "duplicate", got)
        col = store.begin_collecting(rec.key, now=T0 + MINUTE)
        assert col.won and col.record is not None and col.record.state == "collecting"
        assert col.record.state_at == T0 + MINUTE
        lost = store.begin_collecting(rec.key, now=T0 + MINUTE)
        assert (lost.won, lost.reason, lost.record) == (False, "duplicate", col.record)

    def test_the_collecting_cas_writes_its_owner(self, store: Store) -> None:
        rec = _in(store, "submitted")
        col = store.begin_collecting(rec.key, now=T0 + MINUTE, owner="collect-req-1")
        assert col.won and col.record is not None and col.record.owner == "collect-req-1"
        assert store.get(rec.key) == col.record
        lost = store.begin_collecting(rec.key, now=T0 + MINUTE, owner="collect-req-2")
        assert not lost.won and lost.record is not None and lost.record.owner == "collect-req-1"

    @pytest.mark.parametrize(("op", "state"), RIGHT)
    def test_a_right_edge_moves_once(self, store: Store, op: str, state: str) -> None:
        rec = _in(store, state)
        res = OPS[op](store, rec)
        target = {"submit": "submitted", "begin_collecting": "collecting"}.get(op, op)
        assert (res.won, res.reason) == (True, "won")  # type: ignore[attr-defined]
        moved = res.record  # type: ignore[attr-defined]
        assert moved is not None and (moved.state, moved.state_at) == (target, T0 + MINUTE)
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == moved
        if moved.terminal:
            assert moved.finished_at == T0 + MINUTE
        again = OPS[op](store, rec)
        assert (again.won, again.reason, again.record) == (False, "duplicate", moved)  # type: ignore[attr-defined]

    @pytest.mark.parametrize(("op", "state"), WRONG)
    def test_a_wrong_edge_changes_nothing(self, store: Store, op: str, state: str) -> None:
        rec = _in(store, state)
        before = store.get(RunKey.of(SCOPE, "r1", rec.run_id))
        routine = store.get_routine(SCOPE, "r1")
        res = OPS[op](store, rec)
        assert (res.won, res.reason, res.record) == (False, "duplicate", before)  # type: ignore[attr-defined]
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == before
        assert store.get_routine(SCOPE, "r1") == routine

    @pytest.mark.parametrize("op", ["submit", "begin_collecting", "completed"])
    def test_transitions_on_unknown_runs(self, store: Store, op: str) -> None:
        register(store)
        ghost = dataclasses.replace(claim(store), run_id="2000-01-01T00:00:00Z")
        res = OPS[op](store, ghost)
        assert (res.won, res.reason, res.record) == (False, "not_found", None)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ annotate

    def test_annotate_writes_only_annotatable_fields(self, store: Store) -> None:
        rec = run_in(store, "running")
        values = {
            "session_id": "s-1",
            "turn_id": "t-1",
            "batch_id": "b-1",
            "target_task_id": "task",
            "caps_crossed": ["per_run"],
            "delivery_hash": "abc",
            "result_text": "hello \u2603",
            "erase_at": T0 + HOUR,
            "cost_micros": 1234,
        }
        out = store.annotate(rec.key, values)
        assert out.state == "running" and out.state_at == rec.state_at
        assert out.caps_crossed == ("per_run",)
        for name, value in values.items():
            if name != "caps_crossed":
                assert getattr(out, name) == value, name
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == out
        for bad in (
            {"state": "completed"},
            {"reason": "ok"},
            {"reserved_micros": 1},
            {"session_id": "x", "fire_at": T0},
        ):
            with pytest.raises(InvalidInput):
                store.annotate(rec.key, bad)
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == out

    def test_annotate_leaves_terminal_runs_alone(self, store: Store) -> None:
        done = _terminal(store)
        assert store.annotate(done.key, {"result_text": "late"}) == done
        assert store.get(RunKey.of(SCOPE, "r1", done.run_id)) == done

    def test_annotate_unknown_run(self, store: Store) -> None:
        register(store)
        with pytest.raises(NotFound):
            store.annotate(key_of("r1", "manual:none"), {"session_id": "s"})

    # ------------------------------------------------------------------ finish

    def test_finish_completes_once(self, store: Store) -> None:
        rec = run_in(store, "running")
        res = store.finish(rec.key, RunResult.completed("delivered", 250), now=T0 + MINUTE, timers=TIMERS)
        assert res.won and res.record is not None
        done = res.record
        assert (done.state, done.reason, done.cost_micros, done.finished_at, done.state_at) == (
            "completed",
            "delivered",
            250,
            T0 + MINUTE,
            T0 + MINUTE,
        )
        again = store.finish(rec.key, RunResult.failed("runner_error"), now=T0 + HOUR, timers=TIMERS)
        assert (again.won, again.reason, again.record) == (False, "duplicate", done)

    def test_finish_keeps_the_error_class_and_recorded_cost(self, store: Store) -> None:
        rec = run_in(store, "running")
        store.annotate(rec.key, {"cost_micros": 77})
        res = store.finish(
            rec.key,
            RunResult.failed("provider_error", error_class="HTTPError"),
            now=T0 + MINUTE,
            timers=TIMERS,
        )
        assert res.record is not None
        assert (res.record.reason, res.record.error_class, res.record.cost_micros) == (
            "provider_error",
            "HTTPError",
            77,
        )

    def test_finish_sets_erase_at_when_text_is_kept(self, store: Store) -> None:
        rec = run_in(store, "running")
        store.annotate(rec.key, {"result_text": "the answer"})
        res = store.finish(rec.key, RunResult.completed("delivered"), now=T0 + MINUTE, timers=TIMERS)
        assert res.record is not None and res.record.result_text == "the answer"
        assert res.record.erase_at == T0 + MINUTE + TIMERS.result_retention

    def test_finish_refuses_non_terminal_outcomes_and_unknown_reasons(self, store: Store) -> None:
        rec = run_in(store, "running")
        with pytest.raises(InvalidInput):
            store.finish(rec.key, RunResult.submitted(), now=T0, timers=TIMERS)
        with pytest.raises(InvalidInput):
            store.finish(rec.key, RunResult.failed("Traceback: boom"), now=T0, timers=TIMERS)
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == rec

    # ------------------------------------------------------------------ finish narrowed (from_states)

    def test_a_finish_from_a_state_the_caller_does_not_own_changes_nothing(self, store: Store) -> None:
        """Collector B read ``submitted``; A won ``collecting``: B's finish(failed) from {"submitted"}
        must lose, leaving the row, the streak (threshold 1 would latch a pause) and the money."""
        register(store)
        rec = running(store)
        assert store.reserve(rec.key, DAY, 100, [Ceiling(ORG_CEILING, 1_000)]).ok
        store.submit(rec.key, now=T0, batch_id="b", deadline=T0 + HOUR, next_poll_at=T0 + MINUTE)
        assert store.begin_collecting(rec.key, now=T0 + SECOND).won
        before = everything(store)
        for outcome in (RunResult.failed("provider_gone"), RunResult.timed_out(), RunResult.completed()):
            lost = store.finish(rec.key, outcome, now=T0 + MINUTE, timers=with_threshold(1), from_states={"submitted"})
            assert (lost.won, lost.reason) == (False, "duplicate"), outcome
            assert lost.record is not None and lost.record.state == "collecting"
        assert everything(store) == before
        assert store.spend(ORG_CEILING, DAY) == 100
        won = store.finish(
            rec.key, RunResult.completed("delivered", 30), now=T0 + MINUTE, timers=TIMERS, from_states=["collecting"]
        )
        assert won.won and won.record is not None and (won.record.state, won.record.reserved_micros) == ("completed", 0)
        assert store.spend(ORG_CEILING, DAY) == 30

    def test_from_states_narrows_and_never_widens(self, store: Store) -> None:
        rec = run_in(store, "submitted")
        wide = store.finish(
            rec.key, RunResult.completed(), now=T0 + MINUTE, timers=TIMERS, from_states={"submitted", "collecting"}
        )
        assert (wide.won, wide.reason, wide.record) == (False, "duplicate", rec)  # completed never leaves submitted
        none = store.finish(rec.key, RunResult.failed("provider_gone"), now=T0 + MINUTE, timers=TIMERS, from_states=())
        assert (none.won, none.record) == (False, rec)
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == rec
        many = store.finish(
            rec.key,
            RunResult.failed("provider_gone"),
            now=T0 + MINUTE,
            timers=TIMERS,
            from_states=frozenset({"running", "submitted"}),
        )
        assert many.won and many.record is not None and many.record.state == "failed"

    def test_from_states_refuses_bad_values(self, store: Store) -> None:
        rec = run_in(store, "submitted")
        before = everything(store)
        for bad in ("submitted", {"completed"}, {"no-such-state"}, {None}):
            with pytest.raises(InvalidInput):
                store.finish(
                    rec.key,
                    RunResult.failed("provider_gone"),
                    now=T0,
                    timers=TIMERS,
                    from_states=bad,  # type: ignore[arg-type]
                )
        assert everything(store) == before

    # ------------------------------------------------------------------ record (operator)

    @pytest.mark.parametrize("state", ["claimed", "running", "submitted", "collecting"])
    def test_record_moves_any_non_terminal_run(self, store: Store, state: str) -> None:
        rec = run_in(store, state)
        res = store.record(RunKey.of(SCOPE, "r1", rec.run_id), "failed", "reconciled", now=T0 + HOUR)
        assert res.won and res.record is not None
        assert (res.record.state, res.record.reason, res.record.finished_at) == (
            "failed",
            "reconciled",
            T0 + HOUR,
        )
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.consecutive_failures == 0, "record never counts"
        again = store.record(RunKey.of(SCOPE, "r1", rec.run_id), "completed", "reconciled", now=T0 + HOUR)
        assert (again.won, again.reason, again.record) == (False, "duplicate", res.record)
        assert store.take_resends(T0 + 10 * HOUR, 10, TIMERS).resend == ()

    def test_record_refuses_bad_outcomes_and_other_scopes(self, store: Store) -> None:
        rec = run_in(store, "running")
        with pytest.raises(InvalidInput):
            store.record(RunKey.of(SCOPE, "r1", rec.run_id), "running", "reconciled", now=T0)
        with pytest.raises(InvalidInput):
            store.record(RunKey.of(SCOPE, "r1", rec.run_id), "failed", "because I said so", now=T0)
        res = store.record(RunKey.of(OTHER_ORG, "r1", rec.run_id), "failed", "reconciled", now=T0)
        assert (res.won, res.reason, res.record) == (False, "not_found", None)
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == rec
