"""The ``slow`` kind of the chaos suite (reached through the ``alma_schedule.runners`` entry point
group, like the e2e kinds): records its start in the suite's own table, sleeps
``definition["seconds"]``, records its end. A fire run twice, or two runs of one routine at once,
show in that table whatever our ledger says."""

from __future__ import annotations

import time
from typing import Any

import chaos_effects

from alma_schedule.model import Routine, RunHandle, RunResult


class SlowRunner:
    def validate(self, routine: Routine) -> None:
        return None

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        row = chaos_effects.started("slow", routine.routine_id, str(handle.key))
        time.sleep(float(routine.definition.get("seconds", 1)))
        chaos_effects.ended(row)
        return RunResult.completed()


def slow_factory(settings: Any) -> SlowRunner:
    return SlowRunner()
