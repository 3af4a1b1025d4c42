"""policies.ownership: the owner a run task writes, which runs a request owns, and what a loss
report does to a running run of each kind; policies.finish_retry: the owner's back-off."""

from __future__ import annotations

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import BlockedWhy, RunKey
from alma_schedule.policies.finish_retry import CAP, FIRST, retry_delay
from alma_schedule.policies.ownership import MAX_OWNER_LENGTH, check_owner, lost_effect, owned_by, owner_of
from alma_schedule.policies.streak import counts

KEY = RunKey("acme", "u1", "daily", "2026-03-02T08:00:00Z")


def test_the_owner_of_a_run_and_of_a_packed_fire() -> None:
    assert owner_of("req-1") == "req-1"
    assert owner_of("req-1", KEY) == "req-1/acme/u1/daily/2026-03-02T08:00:00Z"
    longest = owner_of("x" * 36, RunKey("o" * 200, "u" * 200, "r" * 200, "i" * 200))
    assert len(longest) <= MAX_OWNER_LENGTH  # every packed owner fits


@pytest.mark.parametrize(
    ("owner", "request_id", "mine"),
    [
        ("req-1", "req-1", True),
        ("req-1/acme/u1/daily/x", "req-1", True),
        ("req-10", "req-1", False),
        ("req-1x/acme", "req-1", False),
        ("REQ-1", "req-1", False),
        (None, "req-1", False),
    ],
)
def test_which_runs_a_request_owns(owner: str | None, request_id: str, mine: bool) -> None:
    assert owned_by(owner, request_id) is mine


@pytest.mark.parametrize("bad", ["", "a\x00", "x" * (MAX_OWNER_LENGTH + 1), 3, None])
def test_a_bad_owner_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(InvalidInput, match=r"^owner"):
        check_owner(bad)


@pytest.mark.parametrize("why", [BlockedWhy.WORKER_LOST, BlockedWhy.TIME_LIMIT])
def test_only_an_untracked_task_run_is_failed_and_it_never_counts(why: BlockedWhy) -> None:
    failed = lost_effect("task", {"task": "fleet.send"}, why)
    assert not isinstance(failed, BlockedWhy)
    assert (failed.outcome, failed.reason) == ("failed", "worker_lost")
    assert failed.error_class == ("WorkerLostError" if why == BlockedWhy.WORKER_LOST else "TimeLimitExceeded")
    assert not counts(failed.outcome, failed.reason)
    assert lost_effect("task", {"task": "fleet.send", "track": False}, why) == failed
    for kind, definition in [("task", {"task": "t", "track": True}), ("turn", {}), ("job", {}), ("mine", {})]:
        assert lost_effect(kind, definition, why) == why


def test_the_finish_back_off_doubles_to_its_cap_and_never_passes_the_time_left() -> None:
    delays = [retry_delay(n, 1_000.0) for n in range(1, 10)]
    assert delays[0] == FIRST and delays[1] == 2 * FIRST
    assert all(d is not None and d <= CAP for d in delays) and delays[-1] == CAP
    assert delays == sorted(delays, key=lambda d: d or 0.0)
    assert retry_delay(3, 0.05) == 0.05
    assert retry_delay(1, 0.0) is None and retry_delay(1, -1.0) is None
    assert retry_delay(10_000, 5.0) == CAP  # no overflow for a long outage
    with pytest.raises(ValueError):
        retry_delay(0, 1.0)
