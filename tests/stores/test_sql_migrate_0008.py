"""Issue 45's revision (``0008_hardening``) on both backends: ``routines.schedule_starts`` comes last
with a constant default and is seeded from ``schedule_claims``, so every routine keeps its meaning
across the upgrade (item 13): a routine finished before it stays finished, a one-off whose claim is
still pending runs that fire once (its claim is not counted twice), and the block round-trips."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from alma_schedule.model import Routine, RunKey, RunResult
from alma_schedule.policies.finished import finished_reason
from alma_schedule.stores.base import Store
from alma_schedule.stores.sql import migrate_store
from alma_schedule.stores.sql.engine import make_engine
from alma_schedule.stores.sql.migrate import alembic_config
from alma_schedule.stores.sql.namespace import Namespace
from alma_schedule.stores.sql.schema import HEAD_REVISION
from alma_schedule.testing.builders import MINUTE, SCOPE, T0, TIMERS, claim, fire_due_long, register
from alma_schedule.testing.contract_limits import limited
from tests.stores.sql_support import fast_dir, opened, pg_database, table_name

ROUTINE_FIELDS = [f.name for f in dataclasses.fields(Routine)]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        with fast_dir() as path:
            yield f"sqlite:///{Path(path)}/store.sqlite3"
    else:
        with pg_database(migrated=False) as pg:
            yield pg


def _move(url: str, target: str) -> None:
    engine = make_engine(url)
    space = Namespace.of(None, engine.dialect.name)
    try:
        with engine.connect() as conn:
            cfg = alembic_config(space)
            cfg.attributes["connection"] = conn
            (command.downgrade if target != "head" else command.upgrade)(cfg, target)
            conn.commit()
    finally:
        engine.dispose()


def _columns(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        schema = "alma" if url.startswith("postgresql") else None
        return [c["name"] for c in sa.inspect(engine).get_columns(table_name(url, "routines").split(".")[-1], schema)]
    finally:
        engine.dispose()


def _sql(url: str, statement: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def _before_the_upgrade(url: str) -> RunKey:
    """Routines as issue 15's code left them (claims counted, the index cleared at the limit), then
    the store taken back to ``0007_on_time``. Returns the one-off's pending claim."""
    with opened(url) as store:
        register(store, "done", schedule={"every": 60, "max_runs": 2}, next_due_at=T0)
        register(store, "one-off", schedule={"every": 60, "max_runs": 1}, next_due_at=T0)
        register(store, "half", schedule={"every": 60, "max_runs": 3}, next_due_at=T0)
        register(store, "free", next_due_at=T0)
        claimed = {r.routine_id: r.key for r in store.claim_due(T0, 100, fire_due_long, TIMERS).claimed}
        for rid in ("half", "done"):  # these ran; the one-off's claim is still pending
            assert store.start(claimed[rid], now=T0).won
            assert store.finish(claimed[rid], RunResult.completed(), now=T0, timers=TIMERS).won
    routines = table_name(url, "routines")
    _sql(url, f"UPDATE {routines} SET schedule_claims = 2, next_due_at = NULL WHERE routine_id = 'done'")
    _sql(url, f"UPDATE {routines} SET schedule_claims = 1, next_due_at = NULL WHERE routine_id = 'one-off'")
    _sql(url, f"UPDATE {routines} SET schedule_claims = 1 WHERE routine_id = 'half'")
    _move(url, "0007_on_time")
    assert "schedule_starts" not in _columns(url)
    return claimed["one-off"]


def _row(store: Store, rid: str) -> Routine:
    row = store.get_routine(SCOPE, rid)
    assert row is not None
    return row


def test_the_starts_are_seeded_from_the_claims_and_every_routine_keeps_its_meaning(url: str) -> None:
    assert migrate_store(url) == HEAD_REVISION
    assert _columns(url) == ROUTINE_FIELDS, "schedule_starts last of 0008's columns, as in Routine"
    pending = _before_the_upgrade(url)
    _move(url, "head")
    assert _columns(url) == ROUTINE_FIELDS
    with opened(url) as store:
        starts = {r.routine_id: (r.schedule_claims, r.schedule_starts) for r in store.iter_routines()}
        assert starts == {"done": (2, 2), "one-off": (1, 0), "half": (1, 1), "free": (0, 0)}
        done = _row(store, "done")
        assert finished_reason(done, T0 + 2 * MINUTE) == "max_runs", "finished before the upgrade, finished after"
        assert done.next_due_at is None
        started = store.start(pending, now=T0 + MINUTE)  # the one-off's pending claim runs, once
        assert started.won and started.routine is not None
        assert (started.routine.schedule_starts, started.routine.next_due_at) == (1, None)
        assert finished_reason(_row(store, "one-off"), T0 + 2 * MINUTE) == "max_runs"


def test_an_old_worker_s_insert_counts_from_zero_and_the_block_round_trips(url: str) -> None:
    assert migrate_store(url) == HEAD_REVISION
    with opened(url) as store:
        register(store, "r1", schedule={"every": 60, "max_runs": 5}, next_due_at=T0)
        rec = claim(store, "r1", decide=limited(5))
        assert store.start(rec.key, now=T0).won
    old = [c for c in _columns(url) if c != "schedule_starts"]
    routines = table_name(url, "routines")
    copied = ", ".join("'r2'" if c == "routine_id" else c for c in old)  # r1's row as r2, as 0007 wrote it
    _sql(url, f"INSERT INTO {routines} ({', '.join(old)}) SELECT {copied} FROM {routines} WHERE routine_id = 'r1'")
    with opened(url) as store:
        assert (_row(store, "r1").schedule_starts, _row(store, "r2").schedule_starts) == (1, 0)
    _move(url, "0007_on_time")
    assert "schedule_starts" not in _columns(url)
    _move(url, "head")
    with opened(url) as store:
        kept = _row(store, "r1")
        assert (kept.schedule_claims, kept.schedule_starts) == (1, 1), "re-seeded from its claim, which started"
        assert kept.last_fire == T0, "the rest of the row survived the round trip"
