"""Refusals name the field the user wrote (issue 45, item 13): an ``at`` of year 9999 is refused as
``'at'`` (not as the ``next_due_at`` it would have become), ``"deadline": "forever"`` as
``'deadline'`` (not ``'every'``), and nothing is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from engine_support import SCOPE, spec

from alma_schedule.core.interval import parse_interval
from alma_schedule.errors import InvalidInput, InvalidSchedule, NotFound, RegistrationRefused
from alma_schedule.runners.task import TaskDefinition


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"at": "9999-12-31T00:00:00+00:00"}, "'at'"),
        ({"at": "9000-01-01T00:00:00+00:00"}, "'at'"),  # the range ends before 9000-01-01
        ({"every": "1h", "not_before": "9999-01-01T00:00:00+00:00"}, "'not_before'"),
    ],
)
def test_an_instant_outside_the_supported_range_is_refused_naming_its_field(
    make: Callable[..., Any], schedule: dict[str, Any], field: str
) -> None:
    sched = make()
    with pytest.raises(RegistrationRefused) as refused:
        sched.register(spec("r1", schedule))
    text = str(refused.value)
    assert text.startswith(field) and "outside the supported range" in text, text
    assert "next_due_at" not in text
    with pytest.raises(NotFound):  # nothing written
        sched.get(SCOPE, "r1")


def test_a_far_not_after_still_registers(make: Callable[..., Any]) -> None:
    receipt = make().register(spec("r1", {"every": "1h", "not_after": "9999-12-31T00:00:00+00:00"}))
    assert receipt.routine.next_due_at is not None


@pytest.mark.parametrize("deadline", ["forever", "P", "1.5h", True])
def test_a_bad_deadline_is_refused_naming_deadline(deadline: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        TaskDefinition.parse({"task": "fleet.add", "track": True, "deadline": deadline})
    text = str(refused.value)
    assert text.startswith("'deadline'") and "'every'" not in text, text


def test_an_interval_refusal_names_the_field_it_was_given() -> None:
    with pytest.raises(InvalidSchedule, match=r"^'every' 'soon' is not an interval"):
        parse_interval("soon")
    with pytest.raises(InvalidSchedule, match=r"^'deadline' 'forever' is not an interval"):
        parse_interval("forever", name="deadline")
