"""A fire blocked by its routine's open run is written in its final state by the claim's FIRST insert
on PostgreSQL: the supersede statement probes every routine's open run anyway and reports the ones
it leaves open, so the fire is inserted ``skipped(overlap)`` (or ``buffered`` for ``overlap:
latest``) at once, with no second insert. SQLite's supersede cannot report them (no DML in a CTE):
its blocked fires lose their claim to the open run and are recorded by the second insert, as
before. The ledger is the same on both.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from alma_schedule.model import Fire, Routine, RunState
from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing.builders import MINUTE, SCOPE, T0, TIMERS, fire_due_long, key_of, register, run_in
from tests.stores.sql_support import fast_dir, opened, pg_database, sqlite_copy, sqlite_template

T1 = T0 + MINUTE


@pytest.fixture(params=["sqlite", pytest.param("pg", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[SqlStore]:
    if request.param == "pg":
        with pg_database() as url, opened(url) as pg:
            yield pg
        return
    with fast_dir() as directory, sqlite_template(directory) as template, opened(sqlite_copy(template, directory)) as s:
        yield s


def _decide(routine: Routine) -> Fire:
    fire: Fire = fire_due_long(routine)
    return dataclasses.replace(fire, buffer=routine.routine_id == "waiting")


def test_blocked_fires_are_recorded_in_the_first_insert_on_postgres(store: SqlStore) -> None:
    busy = run_in(store, "running", "busy")  # blocks: skipped(overlap)
    waiting = run_in(store, "running", "waiting")  # blocks an overlap-latest fire: buffered
    old = run_in(store, "claimed", "pending")  # an older schedule claim: superseded
    register(store, "free", next_due_at=T1)
    inserts: list[str] = []

    def grab(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if re.match(r"\s*INSERT INTO \S*runs\b", statement):
            inserts.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", grab)
    try:
        batch = store.claim_due(T1, 100, _decide, TIMERS)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", grab)

    assert len(inserts) == (1 if store.dialect == "postgresql" else 2)
    assert sorted(r.routine_id for r in batch.claimed) == ["free", "pending"]
    assert [r.routine_id for r in batch.buffered] == ["waiting"]
    skipped = {(r.routine_id, r.run_id): (r.state, r.reason) for r in batch.skipped}
    assert skipped == {
        ("busy", batch.claimed[0].run_id): (RunState.SKIPPED, "overlap"),
        ("pending", old.run_id): (RunState.SKIPPED, "missed"),
    }
    fire = batch.claimed[0].run_id
    blocked = store.get(key_of("busy", fire))
    assert blocked is not None
    assert (blocked.state, blocked.reason, blocked.finished_at, blocked.resend_at) == ("skipped", "overlap", T1, None)
    buffered = store.get(key_of("waiting", fire))
    assert buffered is not None and buffered.state == RunState.BUFFERED
    assert buffered.finished_at is None and buffered.resend_at is not None
    for rec in (busy, waiting):  # the blocking runs are untouched
        now = store.get(rec.key)
        assert now is not None and now.state == RunState.RUNNING
    superseded = store.get(old.key)
    assert superseded is not None and (superseded.state, superseded.reason) == ("skipped", "missed")
    assert store.claim_due(T1, 100, _decide, TIMERS).claimed == ()  # nothing twice
    assert {r.routine_id for r in store.list_runs(SCOPE, limit=100) if r.run_id == fire} == {
        "busy",
        "waiting",
        "pending",
        "free",
    }
