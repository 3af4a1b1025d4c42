"""``max_runs`` counts starts (issue 45, item 13): the pure rule both stores apply in their start."""

from __future__ import annotations

import pytest

from alma_schedule.policies.limits import COUNTED_ORIGIN, count_claim, count_start, limit_of, starts_left


def test_a_schedule_start_counts_and_the_one_reaching_the_limit_finishes() -> None:
    assert count_start(0, 2, COUNTED_ORIGIN) == (1, False)
    assert count_start(1, 2, COUNTED_ORIGIN) == (2, True)


def test_a_start_over_the_limit_is_refused_and_counts_nothing() -> None:
    assert count_start(2, 2, COUNTED_ORIGIN) is None
    assert count_start(3, 1, COUNTED_ORIGIN) is None  # max_runs lowered under the count


@pytest.mark.parametrize("origin", ["manual", "backfill"])
def test_manual_and_backfill_starts_never_count(origin: str) -> None:
    assert count_start(5, 1, origin) == (5, False)


def test_an_unlimited_routine_is_never_counted() -> None:
    assert count_start(7, None, COUNTED_ORIGIN) == (7, False)


def test_the_claim_side_claims_while_starts_are_left() -> None:
    assert [starts_left(s, 2) for s in (0, 1, 2, 3)] == [2, 1, 0, 0]
    assert starts_left(10, None) is None
    assert count_claim(4) == 5


@pytest.mark.parametrize(
    ("schedule", "limit"),
    [
        ({"every": 60, "max_runs": 3}, 3),
        ({"every": 60}, None),
        ({"every": 60, "max_runs": True}, None),  # a JSON boolean is no number (as in SQL)
        ({"every": 60, "max_runs": "3"}, None),
        ({"every": 60, "max_runs": None}, None),
        ({"every": 60, "max_runs": 2.5}, 3),  # starts < 2.5 is starts < 3 for a whole count
        ({"every": 60, "max_runs": float("inf")}, None),
    ],
)
def test_the_limit_is_read_from_the_stored_schedule_as_the_sql_statement_reads_it(
    schedule: dict[str, object], limit: int | None
) -> None:
    assert limit_of(schedule) == limit
