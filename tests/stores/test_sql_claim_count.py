"""PostgreSQL: ``max_runs``' count rides in the claim's INSERT (a data-modifying CTE reading the rows the
INSERT returned): no UPDATE of its own, and only a row that INSERT made ``claimed`` counts (a fire
blocked by its routine's run, or a duplicate whose run key exists, does not). The counts themselves
are the store contract's (``alma_schedule.testing.contract_limits``, every backend)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from alma_schedule.model import Fire, Routine
from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing.builders import MINUTE, SCOPE, T0, TIMERS, fire_due_long, register, run_in
from tests.stores.sql_support import opened, pg_database

pytestmark = pytest.mark.postgres

T1 = T0 + MINUTE


@pytest.fixture
def store() -> Iterator[SqlStore]:
    with pg_database() as url, opened(url) as store:
        yield store


def _limited(routine: Routine) -> Fire:
    fire: Fire = fire_due_long(routine)
    return dataclasses.replace(fire, max_runs=3)


def _statements(store: SqlStore, now: Any) -> tuple[list[str], Any]:
    seen: list[str] = []

    def grab(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", grab)
    try:
        batch = store.claim_due(now, 100, _limited, TIMERS)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", grab)
    return seen, batch


def test_the_count_rides_in_the_insert_and_counts_only_what_it_made_claimed(store: SqlStore) -> None:
    run_in(store, "running", "busy", now=T0)  # its fire at T0 (no limit then: not counted) blocks the next
    register(store, "free", next_due_at=T1)
    register(store, "other", next_due_at=T1)
    seen, batch = _statements(store, T1)
    assert sorted(r.routine_id for r in batch.claimed) == ["free", "other"]
    assert [(r.routine_id, r.reason) for r in batch.skipped] == [("busy", "overlap")]
    counts = [s for s in seen if re.search(r"schedule_claims=", s)]  # the statements writing the count
    assert len(counts) == 1 and re.search(r"INSERT INTO \S*runs", counts[0]), counts  # one statement for both
    rows = {rid: store.get_routine(SCOPE, rid) for rid in ("busy", "free", "other")}
    assert {rid: r.schedule_claims for rid, r in rows.items() if r is not None} == {"busy": 0, "free": 1, "other": 1}


def test_a_duplicate_fire_of_a_limited_routine_does_not_count(store: SqlStore) -> None:
    register(store, "r1", next_due_at=T0)
    [first] = store.claim_due(T0, 100, _limited, TIMERS).claimed
    with store.engine.begin() as conn:  # the cursor back: the same fire is decided again
        conn.exec_driver_sql("UPDATE alma.routines SET last_fire = NULL, next_due_at = %(t)s", {"t": T0})
    batch = store.claim_due(T0, 100, _limited, TIMERS)
    assert batch.claimed == () and batch.skipped == ()  # a duplicate: no row, nothing superseded
    row = store.get_routine(SCOPE, "r1")
    assert row is not None and row.schedule_claims == 1
    assert store.get(first.key) == first
