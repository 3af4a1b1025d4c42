"""Contract: the blocked marker (``mark_blocked``): a ``running`` run blocked at once, listed by ``blocked``."""

from __future__ import annotations

from typing import Any

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import BLOCKED_WHY, BlockedWhy, Ceiling, RunKey, RunResult, RunState
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    DAY,
    MINUTE,
    OTHER_ORG,
    SECOND,
    T0,
    TIMERS,
    everything,
    key_of,
    run_in,
)

UNCERTAIN = BlockedWhy.UNCERTAIN_OUTCOME
LIMIT = TIMERS.run_time_limit


class BlockedContract:
    def test_the_why_list_is_closed(self) -> None:
        assert BLOCKED_WHY == {"uncertain_outcome", "worker_lost", "time_limit"}

    def test_a_marked_running_run_is_blocked_at_once_and_stays_running(self, store: Store) -> None:
        rec = run_in(store, "running")
        assert store.blocked(T0 + SECOND, LIMIT) == []
        assert store.mark_blocked(rec.key, why=UNCERTAIN, now=T0 + SECOND) is True
        got = store.get(rec.key)
        assert got is not None
        assert (got.state, got.state_at, got.blocked_at, got.blocked_why) == (
            RunState.RUNNING,
            rec.state_at,
            T0 + SECOND,
            "uncertain_outcome",
        )
        assert [r.key for r in store.blocked(T0 + SECOND, LIMIT)] == [rec.key]  # age proves nothing
        assert store.blocked(T0 + SECOND, LIMIT)[0].blocked_why == "uncertain_outcome"

    def test_the_first_marker_wins_and_the_cost_only_rises(self, store: Store) -> None:
        rec = run_in(store, "running")
        assert store.mark_blocked(rec.key, why=UNCERTAIN, now=T0, cost_micros=800)
        assert store.mark_blocked(rec.key, why=BlockedWhy.WORKER_LOST, now=T0 + MINUTE, cost_micros=500)
        got = store.get(rec.key)
        assert got is not None and (got.blocked_at, got.blocked_why, got.cost_micros) == (T0, UNCERTAIN, 800)
        assert store.mark_blocked(rec.key, why=BlockedWhy.TIME_LIMIT, now=T0 + MINUTE, cost_micros=1_200)
        assert store.mark_blocked(rec.key, why=BlockedWhy.TIME_LIMIT, now=T0 + MINUTE)  # None: cost left
        got = store.get(rec.key)
        assert got is not None and (got.blocked_why, got.cost_micros) == (UNCERTAIN, 1_200)

    def test_the_marker_leaves_the_reservation_to_record(self, store: Store) -> None:
        rec = run_in(store, "running")
        ceilings = [Ceiling("org:org-a", 10_000)]
        assert store.reserve(rec.key, DAY, 3_000, ceilings).ok
        assert store.mark_blocked(rec.key, why=UNCERTAIN, now=T0, cost_micros=3_000)
        got = store.get(rec.key)
        assert got is not None and (got.reserved_micros, got.cost_micros) == (3_000, 3_000)
        assert store.spend("org:org-a", DAY) == 3_000
        done = store.record(rec.key, "failed", "provider_error", now=T0 + MINUTE)
        assert done.won and done.record is not None
        assert (done.record.cost_micros, done.record.reserved_micros) == (3_000, 0)
        assert done.record.blocked_why == UNCERTAIN  # the marker stays, as history
        assert store.spend("org:org-a", DAY) == 3_000
        assert store.blocked(T0 + MINUTE, LIMIT) == []  # recorded: no longer blocked

    @pytest.mark.parametrize("state", ["claimed", "submitted", "collecting"])
    def test_only_a_running_run_is_marked(self, store: Store, state: str) -> None:
        rec = run_in(store, state)
        before = everything(store)
        assert store.mark_blocked(rec.key, why=UNCERTAIN, now=T0, cost_micros=5) is False
        assert everything(store) == before

    def test_a_terminal_or_unknown_run_is_not_marked(self, store: Store) -> None:
        rec = run_in(store, "running")
        assert store.finish(rec.key, RunResult.completed(), now=T0, timers=TIMERS).won
        before = everything(store)
        assert store.mark_blocked(rec.key, why=UNCERTAIN, now=T0) is False
        assert store.mark_blocked(key_of("r1", "nope"), why=UNCERTAIN, now=T0) is False
        other = RunKey.of(OTHER_ORG, "r1", rec.run_id)  # another scope names nothing
        assert store.mark_blocked(other, why=UNCERTAIN, now=T0) is False
        assert everything(store) == before

    @pytest.mark.parametrize(
        ("kw", "names"),
        [
            ({"why": "bored"}, "why"),
            ({"why": 3}, "why"),
            ({"why": UNCERTAIN, "cost_micros": -1}, "cost_micros"),
            ({"why": UNCERTAIN, "cost_micros": True}, "cost_micros"),
            ({"why": UNCERTAIN, "cost_micros": 1.5}, "cost_micros"),
            ({"why": UNCERTAIN, "now": T0.replace(tzinfo=None)}, "now"),
        ],
    )
    def test_bad_input_is_refused_and_writes_nothing(self, store: Store, kw: dict[str, Any], names: str) -> None:
        rec = run_in(store, "running")
        before = everything(store)
        with pytest.raises(InvalidInput, match=names):
            store.mark_blocked(rec.key, **{"now": T0, **kw})
        assert everything(store) == before
