"""PostgreSQL: ``begin_tick_end`` starts the end of a tick at once, pipelined on one connection, and
reads it when its value is called (alma_schedule/stores/sql/store_ticklog.py).

What the contract suite cannot see: on PostgreSQL every part is obtained; ``record_tick``'s write has
run before the value is called (its heartbeat row is locked meanwhile) and commits at that call; a
connection lost meanwhile is a failed heartbeat (never written twice), and nothing half-written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from alma_schedule.model import TickEndAsk, TickEndParts, TickMinute
from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing.builders import HOUR, MINUTE, T0
from alma_schedule.testing.contract_ticklog import end_of_tick_world
from tests.stores.sql_support import heartbeat_locked, kill_heartbeat_writer, opened, pg_database

pytestmark = pytest.mark.postgres

ASK = TickEndAsk(T0, 2, 0.5, 1.0, erroring_limit=5, run_time_limit=HOUR)


@pytest.fixture
def world() -> Iterator[SqlStore]:
    """:func:`end_of_tick_world`, and the heartbeat row written an hour before."""
    with pg_database() as url, opened(url) as store:
        end_of_tick_world(store)
        store.heartbeat(T0 - HOUR)  # the heartbeat row exists: a write of it locks it
        yield store


def test_every_part_is_obtained_and_the_write_runs_before_the_value_is_called(world: SqlStore) -> None:
    store = world
    assert not heartbeat_locked(store)
    with store.begin_tick_end(ASK) as finish:
        assert heartbeat_locked(store, wait=True)  # record_tick already ran, uncommitted: the caller sends meanwhile
        assert store.last_tick() == T0 - HOUR
        parts = finish()
        assert not heartbeat_locked(store)  # committed at the call (the pipeline's Sync)
    assert parts.heartbeat == (T0 + 10 * MINUTE,) and store.next_wake_at() == T0 + 10 * MINUTE
    assert store.last_tick() == T0
    assert store.tick_log() == [TickMinute(T0, 1, 2, 0.5, 1.0)]
    assert parts.erroring == store.erroring(5) and [d.routine_id for d in parts.erroring.routines] == ["bad"]
    assert parts.blocked is not None and list(parts.blocked) == store.blocked(T0, HOUR)
    assert [r.routine_id for r in parts.blocked] == ["slow"]


def test_only_the_parts_asked_are_sent(world: SqlStore) -> None:
    store = world
    with store.begin_tick_end(TickEndAsk(T0, 0, None, None)) as finish:
        parts = finish()
    assert parts == TickEndParts(heartbeat=(T0 + 10 * MINUTE,)) and store.last_tick() == T0


def test_a_connection_lost_meanwhile_reports_the_heartbeat_failed_and_writes_nothing(
    world: SqlStore,
) -> None:
    store = world
    with store.begin_tick_end(ASK) as finish:
        kill_heartbeat_writer(store)
        parts = finish()
    assert parts.heartbeat is None and parts.heartbeat_failed  # sent, its outcome unknown to the tick
    assert parts.erroring is None or parts.erroring == store.erroring(5)  # a read delivered before is kept
    assert parts.blocked is None or list(parts.blocked) == store.blocked(T0, HOUR)
    assert store.last_tick() == T0 - HOUR and store.tick_log() == []  # the write died with its connection
    assert store.record_tick(T0, 2, 0.5, 1.0) == T0 + 10 * MINUTE  # the pool replaced the dead connection
    assert store.tick_log() == [TickMinute(T0, 1, 2, 0.5, 1.0)]


def test_the_value_not_called_still_ends_the_pipeline_and_returns_the_connection(world: SqlStore) -> None:
    store = world
    with pytest.raises(RuntimeError, match="the tick stopped"), store.begin_tick_end(ASK):
        raise RuntimeError("the tick stopped")
    assert not heartbeat_locked(store)
    assert store.blocked(T0 + timedelta(seconds=1), HOUR)  # the pooled connection works (out of pipeline mode)
    assert store.last_tick() == T0  # the pipeline's end committed what had run
