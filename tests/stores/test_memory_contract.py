"""The store contract on the in-memory reference store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing import StoreContract, StoreRaceContract


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> Iterator[MemoryStore]:
        store = MemoryStore()
        yield store
        store.close()


class TestMemoryStoreRaces(StoreRaceContract):
    @pytest.fixture
    def store(self) -> Iterator[MemoryStore]:
        store = MemoryStore()
        yield store
        store.close()


def test_instances_share_nothing() -> None:
    from alma_schedule.testing.builders import SCOPE, T0, register

    a, b = MemoryStore(), MemoryStore()
    register(a)
    a.heartbeat(T0)
    assert b.get_routine(SCOPE, "r1") is None and list(b.iter_routines()) == [] and b.last_tick() is None


def test_the_one_open_run_index_is_enforced() -> None:
    import dataclasses

    from alma_schedule.errors import StoreConflict
    from alma_schedule.testing.builders import claim, register

    store = MemoryStore()
    register(store)
    rec = claim(store)
    with pytest.raises(StoreConflict):
        store._put_run(dataclasses.replace(rec, run_id="manual:x"))
