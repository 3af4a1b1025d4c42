"""Fixtures of the engine tests: the store, the simulated clock, the runner, ``make``.

``store`` is the in-memory reference by default; the key scenarios are marked ``@every_store``
(engine_support) and run on SQLite and PostgreSQL too, through ``open_store`` + ``migrate_store``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from engine_support import T0, ScriptRunner

from alma_schedule.engine import Scheduler, create_schedule
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store


def open_test_store(kind: str, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        from alma_schedule.stores.memory import MemoryStore

        return MemoryStore()
    from alma_schedule.stores import open_store

    url = request.getfixturevalue("migrated_sqlite_url" if kind == "sqlite" else "migrated_pg_url")
    return open_store(url)


@pytest.fixture
def clock() -> SettableTime:
    return SettableTime(T0)


@pytest.fixture
def runner() -> ScriptRunner:
    return ScriptRunner()


@pytest.fixture(params=["memory"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    s = open_test_store(request.param, request)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def make(store: Store, clock: SettableTime, runner: ScriptRunner) -> Callable[..., Scheduler]:
    """``make(dispatcher=None, runner=None, **settings)`` -> a Scheduler on the test store and clock."""

    def build(dispatcher: Any = None, runner_: Any = None, **overrides: Any) -> Scheduler:
        settings = Settings(clock=clock, **overrides)
        return create_schedule(
            store=store,
            runner=runner if runner_ is None else runner_,
            dispatcher=dispatcher,
            settings=settings,
        )

    return build
