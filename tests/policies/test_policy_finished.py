"""policies.finished: the one reading of a finished routine, and the state word of the listings."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from alma_schedule.model import Routine
from alma_schedule.policies.finished import finished_reason, routine_state

R = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
H = timedelta(hours=1)


def _routine(schedule: dict[str, object], **kw: object) -> Routine:
    return Routine("o", "u", "r1", "k", schedule, {}, R, "rev", **kw)  # type: ignore[arg-type]


def test_an_ordinary_routine_is_not_finished() -> None:
    r = _routine({"every": "1h"})
    assert finished_reason(r, R + 100 * H) is None and routine_state(r, R) == "active"


def test_past_not_after() -> None:
    r = _routine({"every": "1h", "not_after": (R + 5 * H).isoformat()})
    assert finished_reason(r, R + 5 * H) is None, "inclusive: not finished at the bound itself"
    assert finished_reason(r, R + 5 * H + timedelta(microseconds=1)) == "not_after"


def test_max_runs_reached() -> None:
    r = _routine({"every": "1h", "max_runs": 2}, schedule_starts=1, schedule_claims=5)
    assert finished_reason(r, R) is None, "claims that never started finish nothing (issue 45, item 13)"
    assert finished_reason(dataclasses.replace(r, schedule_starts=2), R) == "max_runs"


def test_exhausted_schedules() -> None:
    at = _routine({"at": (R + H).isoformat()})
    assert finished_reason(at, R + 2 * H) is None, "due but not yet claimed: not finished"
    assert finished_reason(dataclasses.replace(at, last_fire=R + H), R + 2 * H) == "exhausted"
    # a not_after before the next fire after the cursor: nothing left, even before the bound passes
    bounded = _routine({"every": "1h", "not_after": (R + 90 * timedelta(minutes=1)).isoformat()}, last_fire=R + H)
    assert finished_reason(bounded, R + H) == "exhausted"


def test_the_order_of_reasons_and_of_states() -> None:
    both = _routine({"every": "1h", "max_runs": 1, "not_after": R.isoformat()}, schedule_starts=1)
    assert finished_reason(both, R + H) == "not_after"
    assert routine_state(dataclasses.replace(both, enabled=False), R + H) == "finished"
    assert routine_state(dataclasses.replace(both, deleted_at=R), R + H) == "deleted"
    paused = _routine({"every": "1h"}, paused_reason="manual")
    assert routine_state(paused, R) == "paused"
    assert routine_state(dataclasses.replace(paused, enabled=False), R) == "disabled"


def test_a_schedule_that_does_not_parse_is_not_finished() -> None:
    assert finished_reason(_routine({"cron": "bad"}), R) is None
    assert finished_reason(_routine({"every": "1h", "max_runs": "x"}), R) is None
