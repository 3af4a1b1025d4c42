"""A 0.1.0 store, built for the adoption tests: the tables of the FROZEN 0.1.0 migration
(:mod:`tests.stores.legacy_0_1_0_initial`) in the default schema, ``alembic_version`` at
``0001_initial``, holding rows that today's store API wrote (so they are realistic: routines with
cursors, runs in several states, versions, spend, the heartbeat).

The rows are written into a scratch namespace by a current store, then copied column by column
(0.1.0's columns, by name; later revisions only add columns, with defaults) into the 0.1.0 tables;
the scratch namespace is dropped.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from alma_schedule.model import Ceiling, RunResult
from alma_schedule.stores.sql import SqlStore, migrate_store
from alma_schedule.testing.builders import SCOPE, T0, TIMERS, everything, make_routine, register, run_in
from tests.stores import legacy_0_1_0_initial
from tests.stores.sql_support import opened

TABLES = ("routines", "routine_versions", "runs", "spend", "heartbeat")
SCRATCH = "scratch"


CEILING = Ceiling("routine:legacy", 10_000)
DAY = "2026-03-01"


def fill(store: SqlStore) -> None:
    """Routines with cursors (idle, paused, finished, with open runs), runs in several states,
    a second routine version, a reservation (spend) and the heartbeat."""
    first = register(store, "idle")
    store.put_routine(  # a second version
        make_routine("idle", schedule={"every": 300}), now=T0, expected_revision=first.config_revision
    )
    register(store, "paused-one")
    store.set_paused(SCOPE, "paused-one", "operator", now=T0, next_due_at=None)
    done = run_in(store, "running", "finished")
    store.finish(done.key, RunResult.completed(), now=T0, timers=TIMERS)
    run_in(store, "claimed", "claimed-one")
    run_in(store, "submitted", "submitted-one")
    money = run_in(store, "running", "money-one")
    assert store.reserve(money.key, DAY, 1_500, [CEILING]).ok
    store.heartbeat(T0)


def build_0_1_0_store(url: str) -> tuple[Any, ...]:
    """Make ``url`` (an empty database) a 0.1.0 store holding rows; returns their snapshot."""
    migrate_store(url, schema=SCRATCH)
    with opened(url, schema=SCRATCH) as store:
        fill(store)
        snapshot = (_as_0_1_0(everything(store)), store.last_tick(), store.spend(CEILING.key, DAY))
    engine = sa.create_engine(url)
    postgres = engine.dialect.name == "postgresql"
    try:
        with engine.begin() as conn:
            with Operations.context(MigrationContext.configure(conn)):
                legacy_0_1_0_initial.upgrade()
            conn.exec_driver_sql(
                "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
                "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
            )
            conn.exec_driver_sql("INSERT INTO alembic_version (version_num) VALUES ('0001_initial')")
            for table in TABLES:
                source = f"{SCRATCH}.{table}" if postgres else f"{SCRATCH}_{table}"
                # 0.1.0's columns only, by name: later revisions add columns (with defaults) at the end
                names = ", ".join(c["name"] for c in sa.inspect(conn).get_columns(table))
                conn.exec_driver_sql(f"INSERT INTO {table} ({names}) SELECT {names} FROM {source}")
            if postgres:
                conn.exec_driver_sql(f"DROP SCHEMA {SCRATCH} CASCADE")
            else:
                for table in (*TABLES, "schedule_version"):
                    conn.exec_driver_sql(f"DROP TABLE {SCRATCH}_{table}")
    finally:
        engine.dispose()
    return snapshot


def _as_0_1_0(rows: tuple[Any, ...]) -> tuple[Any, ...]:
    """The snapshot as the 0.1.0 copy holds it: a nullable column 0.1.0 lacked reads NULL there
    (``runs.due_at``, jitter: an adopted run's lag falls back to its ``fire_at``)."""
    routines, runs = rows
    return routines, tuple(tuple(dataclasses.replace(r, due_at=None) for r in scope) for scope in runs)


def snapshot_of(store: SqlStore) -> tuple[Any, ...]:
    """What :func:`build_0_1_0_store` returned, read from ``store``."""
    return everything(store), store.last_tick(), store.spend(CEILING.key, DAY)
