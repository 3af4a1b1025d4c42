"""The jitter offset o(f) (policies/jitter.py): stable across processes, bounded, never hash()."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from alma_schedule.core import Cron, Every, next_fire, next_fires
from alma_schedule.policies.jitter import (
    GAP_HORIZON,
    due_at,
    hash_input,
    jitter_offset,
    jitter_refusal,
    smallest_gap,
)

F = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
KEY = ("acme", "alice", "briefing")


def test_the_hash_input_is_the_four_fields_joined_by_nul() -> None:
    assert hash_input(*KEY, F) == b"acme\x00alice\x00briefing\x002027-01-04T09:00:00Z"
    # sub-seconds do not reach the hash: the fire is named by its run id
    assert hash_input(*KEY, F + timedelta(microseconds=7)) == hash_input(*KEY, F)


def test_known_values_pin_the_encoding_and_the_unit() -> None:
    # sha256(b"acme\0alice\0briefing\x002027-01-04T09:00:00Z") as a big-endian integer, mod seconds
    assert jitter_offset(*KEY, F, timedelta(seconds=30), DAY) == timedelta(seconds=15)
    assert jitter_offset(*KEY, F, timedelta(hours=1), DAY) == timedelta(minutes=31, seconds=45)


def test_the_offset_is_the_same_in_another_process() -> None:
    code = (
        "from datetime import datetime, timedelta, UTC\n"
        "from alma_schedule.policies.jitter import jitter_offset\n"
        "for i in range(50):\n"
        "    f = datetime(2027, 1, 4, 9, 0, tzinfo=UTC) + timedelta(hours=i)\n"
        "    print(int(jitter_offset('acme', 'alice', f'r{i}', f, timedelta(minutes=30), timedelta(hours=1))"
        ".total_seconds()))\n"
    )
    half, hour = timedelta(minutes=30), timedelta(hours=1)
    here = [
        int(jitter_offset("acme", "alice", f"r{i}", F + timedelta(hours=i), half, hour).total_seconds())
        for i in range(50)
    ]
    for seed in ("1", "2"):  # hash() would differ between these two processes
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert [int(line) for line in out.stdout.split()] == here
    assert len(set(here)) > 10  # and it spreads


def test_the_bound_is_the_smaller_of_jitter_and_half_the_gap() -> None:
    for i in range(300):
        f = F + timedelta(minutes=i)
        o = jitter_offset("o", "u", f"r{i}", f, timedelta(hours=1), timedelta(minutes=10))
        assert timedelta(0) <= o < timedelta(minutes=5)
        assert o == timedelta(seconds=int(o.total_seconds()))  # whole seconds
        o = jitter_offset("o", "u", f"r{i}", f, timedelta(seconds=40), timedelta(hours=1))
        assert timedelta(0) <= o < timedelta(seconds=40)


def test_no_jitter_no_gap_and_tiny_bounds() -> None:
    assert jitter_offset(*KEY, F, None, DAY) == timedelta(0)
    assert jitter_offset(*KEY, F, timedelta(0), DAY) == timedelta(0)
    assert jitter_offset(*KEY, F, timedelta(minutes=5), timedelta(seconds=1)) == timedelta(0)  # bound 0.5 s
    # no next fire (an `at`): the bound is the jitter alone
    assert jitter_offset(*KEY, F, timedelta(hours=1), None) == jitter_offset(*KEY, F, timedelta(hours=1), 4 * DAY)


def test_due_instants_keep_the_order_of_the_fires() -> None:
    cron = Cron("*/7 * * * *", "Europe/London")
    anchor = F - DAY
    fires = next_fires(cron, anchor, F, 500)
    dues = [due_at(cron, anchor, KEY, timedelta(minutes=30), f) for f in fires]
    for f, d, nxt in zip(fires, dues, fires[1:], strict=False):
        gap = nxt - f
        assert f <= d < f + gap / 2 + timedelta(seconds=1)
    assert dues == sorted(dues) and len(set(dues)) == len(dues)
    assert due_at(cron, anchor, KEY, None, fires[0]) == fires[0]


def test_the_smallest_gap_and_the_refusal_name_jitter_and_the_gap() -> None:
    cron = Cron("0,50 * * * *", "UTC")  # gaps of 50 and 10 minutes
    assert smallest_gap(cron, F, F) == timedelta(minutes=10)
    assert jitter_refusal(cron, F, F, timedelta(minutes=9, seconds=59)) is None
    why = jitter_refusal(cron, F, F, timedelta(minutes=10))
    assert why is not None and "'jitter' 10m" in why and "(10m among the next 1000)" in why
    assert GAP_HORIZON == 1000
    assert jitter_refusal(cron, F, F, None) is None
    every = Every(timedelta(hours=1))
    assert smallest_gap(every, F, F) == timedelta(hours=1)
    assert next_fire(every, F, F) == F + timedelta(hours=1)


@pytest.mark.parametrize("jitter", [timedelta(hours=1), timedelta(hours=2)])
def test_a_jitter_of_a_whole_gap_or_more_is_refused(jitter: timedelta) -> None:
    assert jitter_refusal(Every(timedelta(hours=1)), F, F, jitter) is not None
