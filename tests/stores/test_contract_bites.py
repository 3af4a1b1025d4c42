"""The contract suite can fail: broken stores (small mutants of the reference) are caught by it.

Each mutant breaks one rule of the protocol; the named contract test must then fail with an
AssertionError (or miss an expected error). Racy mutants do their check and their write in two
steps, like a backend that forgot its lock or its compare-and-set.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pytest

from alma_schedule.model import Ceiling, ClaimResult, ReserveResult, RunKey, Scope
from alma_schedule.settings import Timers
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing import StoreContract, StoreRaceContract


class PauseOverwrites(MemoryStore):
    def set_paused(self, scope: Scope, routine_id: str, reason: str | None, **kw: Any) -> Any:
        if reason is not None:
            with self._lock:
                super().set_paused(scope, routine_id, None, **kw)
        return super().set_paused(scope, routine_id, reason, **kw)


class LeakyScope(MemoryStore):
    def get_routine(self, scope: Scope, routine_id: str, *, include_deleted: bool = False) -> Any:
        for key in self._routines:
            if key[2] == routine_id:
                return self._out(key)
        return None


class ResendsForever(MemoryStore):
    def take_resends(self, now: datetime, limit: int, timers: Timers, *, send: bool = True) -> Any:
        frozen = dataclasses.replace(timers, resend_first=timers.resend_first * 0, resend_max=timers.resend_max * 0)
        return super().take_resends(now, limit, frozen, send=send)


class StreakNeverResets(MemoryStore):
    def _streak(self, rk: Any, result: Any, now: Any, timers: Any) -> None:
        if result.outcome != "completed":
            super()._streak(rk, result, now, timers)


class NoSupersession(MemoryStore):
    def claim_due(self, now: datetime, limit: int, decide: Callable[..., Any], timers: Timers, scan: Any = None) -> Any:
        with self._lock:
            blockers = {k: r for k, r in self._active.items() if self._runs[k][r].origin == "schedule"}
            for k, rid in blockers.items():  # pretend schedule claims block like manual ones
                rec = self._runs[k][rid]
                if rec.state == "claimed":
                    self._runs[k][rid] = dataclasses.replace(rec, origin="manual")
            try:
                return super().claim_due(now, limit, decide, timers, scan)
            finally:
                for k, rid in blockers.items():
                    rec = self._runs[k][rid]
                    self._runs[k][rid] = dataclasses.replace(rec, origin="schedule")


class RacyStart(MemoryStore):
    def start(self, key: RunKey, *, now: datetime, owner: str | None = None, in_window: bool = False) -> ClaimResult:
        rec = self.get(key)
        if rec is None or rec.state != "claimed":
            return super().start(key, now=now)
        time.sleep(0.001)  # check ... then act
        with self._lock:
            new = dataclasses.replace(rec, state="running", started_at=now, state_at=now)
            self._put_run(new)
        return ClaimResult(True, new, "won")


class RacyReserve(MemoryStore):
    def reserve(self, key: RunKey, day: str, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveResult:
        for c in ceilings:
            if self.spend(c.key, day) + amount_micros > c.limit_micros:
                return ReserveResult(False, c.key, None)
        time.sleep(0.005)
        return super().reserve(key, day, amount_micros, [Ceiling(c.key, 10**12) for c in ceilings])


class FinishIgnoresFromStates(MemoryStore):
    def finish(self, key: RunKey, result: Any, *, now: datetime, timers: Timers, from_states: Any = None) -> Any:
        return super().finish(key, result, now=now, timers=timers)  # any EDGES source, whoever owns it


class StartIgnoresWindow(MemoryStore):
    def start(self, key: RunKey, *, now: datetime, owner: str | None = None, in_window: bool = False) -> ClaimResult:
        return super().start(key, now=now, owner=owner)  # starts a fire past its window


class StartForgetsRoutine(MemoryStore):
    def start(self, key: RunKey, *, now: datetime, owner: str | None = None, in_window: bool = False) -> ClaimResult:
        return dataclasses.replace(super().start(key, now=now, owner=owner, in_window=in_window), routine=None)


class ForgetsCollapsedFires(MemoryStore):
    def claim_due(self, now: datetime, limit: int, decide: Callable[..., Any], timers: Timers, **kw: Any) -> Any:
        def uncounted(routine: Any) -> Any:  # advances the cursor past the collapsed fires, counts none
            d = decide(routine)
            return dataclasses.replace(d, fires_missed=0) if hasattr(d, "fires_missed") else d

        return super().claim_due(now, limit, uncounted, timers, **kw)


class CountsFiresNotDue(MemoryStore):
    def claim_due(self, now: datetime, limit: int, decide: Callable[..., Any], timers: Timers, **kw: Any) -> Any:
        def doubled(routine: Any) -> Any:  # counts fires that were not due (a steady claim, a pause)
            d = decide(routine)
            if hasattr(d, "fires_missed"):
                return dataclasses.replace(d, fires_missed=min(2 * d.fires_missed + 1, 10_000))
            return d

        return super().claim_due(now, limit, doubled, timers, **kw)


class PruneTakesOpenRuns(MemoryStore):
    def prune_runs(self, before: datetime, limit: int) -> int:
        with self._lock:  # an old open run goes too (age proves nothing)
            for rk, run_id in list(self._active.items()):
                if self._runs[rk][run_id].claimed_at < before:
                    del self._runs[rk][run_id], self._active[rk]
            return super().prune_runs(before, limit)


class PruneIgnoresLimit(MemoryStore):
    def prune_runs(self, before: datetime, limit: int) -> int:
        return super().prune_runs(before, 10**6)


class PruneForgetsWatermark(MemoryStore):
    def prune_runs(self, before: datetime, limit: int) -> int:
        with self._lock:  # the rows go, pruned_through stays where it was
            kept = {k: r.pruned_through for k, r in self._routines.items()}
            count = super().prune_runs(before, limit)
            for k, through in kept.items():
                self._routines[k] = dataclasses.replace(self._routines[k], pruned_through=through)
            return count


class Contract(StoreContract):
    pass


class Races(StoreRaceContract):
    race_scale = 0.05


SINGLE = [
    (PauseOverwrites, "test_pause_keeps_the_first_reason"),
    (LeakyScope, "test_another_scope_cannot_reach_a_routine"),
    (ResendsForever, "test_take_resends_backs_off"),
    (StreakNeverResets, "test_streak_rules"),
    (NoSupersession, "test_newer_fire_supersedes_an_older_claimed_one"),
    (FinishIgnoresFromStates, "test_a_finish_from_a_state_the_caller_does_not_own_changes_nothing"),
    (StartIgnoresWindow, "test_start_in_window_refuses_a_closed_window"),
    (StartForgetsRoutine, "test_a_won_start_returns_the_routine_it_joined"),
    (ForgetsCollapsedFires, "test_a_claim_after_downtime_counts_the_fires_it_collapsed"),
    (CountsFiresNotDue, "test_fires_while_paused_are_not_counted_when_resumed"),
    (PruneTakesOpenRuns, "test_prune_runs_deletes_terminal_runs_ended_before_and_never_an_open_one"),
    (PruneIgnoresLimit, "test_at_most_limit_runs_go_per_call_the_oldest_first"),
    (PruneForgetsWatermark, "test_pruned_through_rises_to_the_latest_deleted_fire_never_down"),
]
RACES = [
    (RacyStart, "test_16_threads_start_the_same_runs_once"),
    (RacyReserve, "test_20_routines_race_the_org_ceiling"),
]


@pytest.mark.parametrize(("mutant", "test"), SINGLE, ids=[m.__name__ for m, _ in SINGLE])
def test_the_contract_catches(mutant: type[MemoryStore], test: str) -> None:
    method = getattr(Contract(), test)
    kwargs: dict[str, Any] = {}
    if test == "test_streak_rules":
        from alma_schedule.model import RunResult

        kwargs = {"result": RunResult.completed("delivered"), "expected": 0}
    with pytest.raises((AssertionError, ValueError, pytest.fail.Exception)):
        method(mutant(), **kwargs)
    method(MemoryStore(), **kwargs)  # and the reference passes the same test


@pytest.mark.parametrize(("mutant", "test"), RACES, ids=[m.__name__ for m, _ in RACES])
def test_the_race_contract_catches(mutant: type[MemoryStore], test: str) -> None:
    method = getattr(Races(), test)
    with pytest.raises(AssertionError):
        method(mutant())
    method(MemoryStore())
