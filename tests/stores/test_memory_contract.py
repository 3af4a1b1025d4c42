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
