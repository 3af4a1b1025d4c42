"""Supersession versus overlap, as a pure function."""

from __future__ import annotations

import pytest

from alma_schedule.model import NON_TERMINAL
from alma_schedule.policies import supersession
from alma_schedule.policies.supersession import Placement


def test_no_open_run_claims() -> None:
    assert supersession.place(False, None, None) == Placement.CLAIM


def test_an_older_claimed_schedule_fire_is_superseded() -> None:
    assert supersession.place(False, "claimed", "schedule") == Placement.SUPERSEDE
    assert supersession.SUPERSEDED == ("skipped", "missed")


@pytest.mark.parametrize("state", sorted(NON_TERMINAL))
@pytest.mark.parametrize("origin", ["schedule", "manual"])
def test_every_other_open_run_blocks(state: str, origin: str) -> None:
    expected = Placement.SUPERSEDE if (state, origin) == ("claimed", "schedule") else Placement.OVERLAP
    assert supersession.place(False, state, origin) == expected
    assert supersession.supersedable(state, origin) == (expected == Placement.SUPERSEDE)


@pytest.mark.parametrize(("state", "origin"), [(None, None), ("claimed", "schedule"), ("running", "manual")])
def test_a_missed_fire_touches_nothing(state: str | None, origin: str | None) -> None:
    assert supersession.place(True, state, origin) == Placement.MISSED
    assert supersession.MISSED == ("skipped", "missed") and supersession.OVERLAP == ("skipped", "overlap")


def test_the_reason_a_late_start_loses_with() -> None:
    assert supersession.lost_start_reason("skipped", "missed") == "superseded"
    assert supersession.lost_start_reason("skipped", "overlap") == "duplicate"
    assert supersession.lost_start_reason("running", None) == "duplicate"
