"""Shared parts of the hostile suite (``hostile_support``): the scopes, the runner, the seeded Scheduler."""

from __future__ import annotations

from datetime import UTC, datetime

from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.model import Routine, RoutineSpec, RunHandle, RunResult, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
SCOPE = Scope("org-a", "user-1")
OTHER = Scope("org-b", "user-1")


class Runner:
    """Completes every run (``{"fail": true}``: fails it); ``validate`` refuses ``{"refuse": ...}``."""

    def validate(self, routine: Routine) -> None:
        if routine.definition.get("refuse"):
            raise ValueError("refused by the runner")

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        if routine.definition.get("fail"):
            return RunResult.failed("provider_error")
        return RunResult.completed("ok")


def seeded(store: Store) -> Scheduler:
    """A Scheduler over ``store`` with two routines of each scope, one tick and one trigger done."""
    clock = SettableTime(T0)
    sched = create_schedule(store=store, runner=Runner(), settings=Settings(clock=clock))
    for scope in (SCOPE, OTHER):
        sched.register(RoutineSpec(scope.org, scope.uid, "r1", "k", {"every": 60}, {"text": "hi"}))
        sched.register(RoutineSpec(scope.org, scope.uid, "r2", "k", {"cron": "0 9 * * *"}, {"fail": True}))
    clock.set(T0.replace(hour=9))
    sched.tick()
    sched.trigger(SCOPE, "r1")
    return sched
