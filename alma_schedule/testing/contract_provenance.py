"""Contract: a routine's provenance (``source``, ``source_entry``) and the reason of a disable."""

from __future__ import annotations

import dataclasses

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model.provenance import REMOVED_FROM_BEAT
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import MINUTE, REGISTERED, SCOPE, T0, make_routine, register


class ProvenanceContract:
    def test_provenance_reads_back_and_survives_re_registration(self, store: Store) -> None:
        saved = register(store, source="beat-sync:proj", source_entry="nightly report")
        assert (saved.source, saved.source_entry, saved.disabled_reason) == ("beat-sync:proj", "nightly report", None)
        assert store.list_routines(SCOPE)[0].source == "beat-sync:proj"
        again = make_routine(definition={"text": "v2"}, source="cli")
        kept = store.put_routine(again, now=T0, expected_revision=saved.config_revision)
        assert (kept.source, kept.source_entry) == ("beat-sync:proj", "nightly report")  # who created it
        assert dict(kept.definition) == {"text": "v2"}

    def test_a_new_incarnation_takes_the_given_provenance(self, store: Store) -> None:
        register(store, source="import-beat:proj", source_entry="e1")
        store.delete_routine(SCOPE, "r1", now=T0)
        reborn = store.put_routine(make_routine(source="api"), now=T0 + MINUTE)
        assert (reborn.source, reborn.source_entry) == ("api", None)
        assert [r.source for r in store.iter_routines()] == ["api"]

    def test_rows_without_provenance_read_as_none(self, store: Store) -> None:
        saved = register(store)
        assert (saved.source, saved.source_entry) == (None, None)
        assert store.get_routine(SCOPE, "r1") == saved

    @pytest.mark.parametrize(
        ("source", "entry"),
        [("cron-job", None), ("api", "e1"), ("beat-sync:proj", None), ("import-dcb", ""), ("beat-sync:", "e1")],
    )
    def test_malformed_provenance_is_refused_before_writing(self, store: Store, source: str, entry: str | None) -> None:
        with pytest.raises(InvalidInput):
            register(store, source=source, source_entry=entry)
        assert store.get_routine(SCOPE, "r1") is None

    def test_a_disable_records_its_reason_and_an_enable_clears_it(self, store: Store) -> None:
        register(store, source="beat-sync:proj", source_entry="r1")
        off = store.set_enabled(SCOPE, "r1", False, now=T0, next_due_at=None, reason=REMOVED_FROM_BEAT)
        assert not off.enabled and off.disabled_reason == REMOVED_FROM_BEAT and off.next_due_at is None
        assert store.get_routine(SCOPE, "r1") == off
        on = store.set_enabled(SCOPE, "r1", True, now=T0 + MINUTE, next_due_at=T0 + 2 * MINUTE)
        assert on.enabled and on.disabled_reason is None and on.next_due_at == T0 + 2 * MINUTE

    def test_a_second_disable_keeps_the_first_reason(self, store: Store) -> None:
        register(store)
        store.set_enabled(SCOPE, "r1", False, now=T0, next_due_at=None)  # an operator's, no reason
        again = store.set_enabled(SCOPE, "r1", False, now=T0 + MINUTE, next_due_at=None, reason=REMOVED_FROM_BEAT)
        assert not again.enabled and again.disabled_reason is None  # a no-op: the operator's disable stays

    def test_re_registration_keeps_the_disable_and_its_reason(self, store: Store) -> None:
        saved = register(store)
        store.set_enabled(SCOPE, "r1", False, now=T0, next_due_at=None, reason=REMOVED_FROM_BEAT)
        changed = dataclasses.replace(make_routine(definition={"text": "v2"}), next_due_at=None)
        row = store.put_routine(changed, now=T0 + MINUTE, expected_revision=saved.config_revision)
        assert not row.enabled and row.disabled_reason == REMOVED_FROM_BEAT

    def test_a_reason_is_refused_with_an_enable_and_when_malformed(self, store: Store) -> None:
        register(store)
        with pytest.raises(InvalidInput):
            store.set_enabled(SCOPE, "r1", True, now=T0, next_due_at=T0, reason="why")
        with pytest.raises(InvalidInput):
            store.set_enabled(SCOPE, "r1", False, now=T0, next_due_at=None, reason="bad\x00reason")
        row = store.get_routine(SCOPE, "r1")
        assert row is not None and row.enabled and row.registered_at == REGISTERED
