"""Issue 15's revision, the backfill block, on both backends: the origin CHECK admits ``backfill``
and still refuses anything else (SQLite: after the batch rebuild of ``runs``, with its partial
indexes intact), ``pruned_through`` and ``backfills`` exist, and the block downgrades and upgrades
again (a downgrade deletes the backfill rows the old CHECK would refuse)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from alma_schedule.model import Backfill, BackfillStep
from alma_schedule.stores.sql import migrate_store
from alma_schedule.stores.sql.engine import make_engine
from alma_schedule.stores.sql.migrate import alembic_config
from alma_schedule.stores.sql.namespace import Namespace
from alma_schedule.stores.sql.schema import HEAD_REVISION
from alma_schedule.testing.builders import HOUR, MINUTE, SCOPE, T0, TIMERS, fire_id, register
from tests.stores.sql_support import fast_dir, index_ddl, opened, pg_database, table_name


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


def _raw(url: str, sql: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
    finally:
        engine.dispose()


def _backfill_run(url: str, routine_id: str) -> None:
    with opened(url) as store:
        register(store, routine_id, next_due_at=T0 + HOUR, last_fire=T0)
        fire = T0 - 30 * MINUTE
        store.put_backfill(Backfill(SCOPE.org, SCOPE.uid, routine_id, fire, fire, fire, 10), now=T0)
        step = BackfillStep(((fire_id(fire), fire),), T0 + HOUR, T0 + MINUTE, exhausted=True)
        assert len(store.claim_backfills(T0, 10, lambda r, b: step, TIMERS)) == 1


def test_the_origin_check_admits_backfill_only_and_the_block_round_trips(url: str) -> None:
    assert migrate_store(url) == HEAD_REVISION
    before = index_ddl(url)
    _backfill_run(url, "r1")
    runs = table_name(url, "runs")
    with pytest.raises(sa.exc.IntegrityError):
        _raw(url, f"UPDATE {runs} SET origin = 'bogus'")
    _move(url, "0003_faults")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql(f"SELECT count(*) FROM {runs}").scalar() == 0  # the backfill row went
        names = set(sa.inspect(engine).get_table_names(schema="alma" if url.startswith("postgresql") else None))
    finally:
        engine.dispose()
    assert table_name(url, "backfills").split(".")[-1] not in names
    _move(url, "head")
    assert index_ddl(url) == before  # the rebuilt runs keeps every (partial) index
    _backfill_run(url, "r2")
