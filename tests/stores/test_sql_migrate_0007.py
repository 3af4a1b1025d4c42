"""Issue 44's revision (``0007_on_time``) on both backends: ``routines.fires_missed`` and
``routines.fires_missed_capped`` are added with constant defaults, so a routine row written by an old
worker (which names neither) counts from 0, the count survives nothing it should not, and the block
downgrades and upgrades again."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from alma_schedule.engine.decide import decide
from alma_schedule.model import Routine
from alma_schedule.settings import Settings
from alma_schedule.stores.sql import migrate_store
from alma_schedule.stores.sql.engine import make_engine
from alma_schedule.stores.sql.migrate import alembic_config
from alma_schedule.stores.sql.namespace import Namespace
from alma_schedule.stores.sql.schema import HEAD_REVISION
from alma_schedule.testing.builders import MINUTE, SCOPE, T0, TIMERS, register
from tests.stores.sql_support import fast_dir, opened, pg_database, table_name

NEW = ("fires_missed", "fires_missed_capped")
ROUTINE_FIELDS = [f.name for f in dataclasses.fields(Routine)]  # later revisions add theirs after NEW


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


def _collapse(url: str, routine_id: str) -> int:
    """A routine down for 10 minutes, claimed once: the count the claim wrote."""
    with opened(url) as store:
        register(store, routine_id, last_fire=T0 - 10 * MINUTE, next_due_at=T0 - 9 * MINUTE)
        store.claim_due(T0, 100, lambda r: decide(r, T0, Settings()), TIMERS)
        row = store.get_routine(SCOPE, routine_id)
        assert row is not None
        return row.fires_missed


def test_the_columns_come_with_constant_defaults_and_the_block_round_trips(url: str) -> None:
    assert migrate_store(url) == HEAD_REVISION
    assert _columns(url) == ROUTINE_FIELDS, "added last in the table, in the order of Routine's fields"
    assert _collapse(url, "r1") == 9
    old = [c for c in _columns(url) if c not in NEW]
    routines = table_name(url, "routines")
    engine = sa.create_engine(url)
    try:  # an old worker's INSERT names neither column: the defaults fill them
        with engine.begin() as conn:
            copied = ", ".join("'r2'" if c == "routine_id" else c for c in old)  # r1's row as r2
            conn.exec_driver_sql(
                f"INSERT INTO {routines} ({', '.join(old)}) SELECT {copied} FROM {routines} WHERE routine_id = 'r1'"
            )
            row = conn.exec_driver_sql(f"SELECT {', '.join(NEW)} FROM {routines} WHERE routine_id = 'r2'").one()
    finally:
        engine.dispose()
    assert (row[0], bool(row[1])) == (0, False)
    _move(url, "0006_speed")
    assert not set(NEW) & set(_columns(url))
    _move(url, "head")
    assert _columns(url) == ROUTINE_FIELDS
    with opened(url) as store:
        kept = store.get_routine(SCOPE, "r1")
        assert kept is not None and (kept.fires_missed, kept.fires_missed_capped) == (0, False)
        assert kept.last_fire == T0, "the rest of the row survived the round trip"
    assert _collapse(url, "r3") == 9
