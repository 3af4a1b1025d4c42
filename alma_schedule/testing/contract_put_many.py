"""Contract: ``put_routines`` writes many registrations in one transaction, all or none."""

from __future__ import annotations

import dataclasses

import pytest

from alma_schedule.errors import InvalidInput, StoreConflict
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import MINUTE, REGISTERED, SCOPE, T0, make_routine, register


class PutManyContract:
    def test_put_routines_writes_each_with_its_fields(self, store: Store) -> None:
        old = register(store, "r1")
        changed = make_routine("r1", definition={"text": "v2"})
        fresh = make_routine("r2", last_fire=T0, next_due_at=None, enabled=False, source="import-dcb", source_entry="e")
        out = store.put_routines([(changed, old.config_revision), (fresh, None)], now=T0)
        assert [r.routine_id for r in out] == ["r1", "r2"]
        assert out == [store.get_routine(SCOPE, "r1"), store.get_routine(SCOPE, "r2")]
        assert dict(out[0].definition) == {"text": "v2"} and len(store.routine_versions(SCOPE, "r1")) == 2
        r2 = out[1]
        assert (r2.last_fire, r2.next_due_at, r2.enabled, r2.source, r2.source_entry) == (
            T0,
            None,
            False,
            "import-dcb",
            "e",
        )

    def test_one_stale_revision_writes_nothing(self, store: Store) -> None:
        register(store, "r1")
        batch = [(make_routine("r0"), None), (make_routine("r1", definition={"text": "v2"}), "stale")]
        with pytest.raises(StoreConflict):
            store.put_routines(batch, now=T0)
        assert store.get_routine(SCOPE, "r0") is None
        kept = store.get_routine(SCOPE, "r1")
        assert kept is not None and dict(kept.definition) == {"text": "hello"}

    def test_a_routine_twice_or_a_bad_pair_is_refused_before_writing(self, store: Store) -> None:
        one = make_routine("r1")
        with pytest.raises(InvalidInput, match="twice"):
            store.put_routines([(one, None), (dataclasses.replace(one, next_due_at=T0 + MINUTE), None)], now=T0)
        with pytest.raises(InvalidInput):
            store.put_routines([one], now=T0)  # type: ignore[list-item]
        assert store.get_routine(SCOPE, "r1") is None
        assert store.put_routines([], now=REGISTERED) == []
