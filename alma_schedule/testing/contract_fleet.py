"""Contract: the fleet reads (``fleet_scopes``, ``fleet_routines``): key order, keyset paging that
neither repeats nor skips a row, the ``org``/``uid`` ranges (never another org's rows), deleted
routines listed, ``limit`` honoured, bad arguments refused."""

from __future__ import annotations

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Scope
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import OTHER_ORG, OTHER_UID, REGISTERED, SCOPE, register

#: ids whose code point order differs from a case-folding or natural order.
IDS = ("B", "a", "a-1", "a0", "b")


def _fleet(store: Store) -> list[tuple[str, str, str]]:
    for sc in (SCOPE, OTHER_ORG, OTHER_UID):
        for rid in IDS:
            register(store, rid, scope=sc)
    return sorted((sc.org, sc.uid, rid) for sc in (SCOPE, OTHER_ORG, OTHER_UID) for rid in IDS)


class FleetContract:
    def test_fleet_scopes_pages_in_code_point_order(self, store: Store) -> None:
        assert store.fleet_scopes() == []
        _fleet(store)
        every = [("org-a", "user-1"), ("org-a", "user-2"), ("org-b", "user-1")]
        assert store.fleet_scopes() == every
        assert store.fleet_scopes(limit=2) == every[:2]
        assert store.fleet_scopes(after=every[1], limit=2) == every[2:]
        assert store.fleet_scopes(after=every[2]) == []
        assert store.fleet_scopes(org="org-b") == [("org-b", "user-1")]
        assert store.fleet_scopes(org="org-a", after=("org-a", "user-1")) == [("org-a", "user-2")]
        assert store.fleet_scopes(limit=0) == []

    def test_fleet_routines_page_through_every_routine_once(self, store: Store) -> None:
        keys = _fleet(store)
        seen: list[tuple[str, str, str]] = []
        after = None
        while True:
            page = store.fleet_routines(after=after, limit=4)
            assert len(page) <= 4
            seen += [(r.org, r.uid, r.routine_id) for r in page]
            if len(page) < 4:
                break
            after = (page[-1].org, page[-1].uid, page[-1].routine_id)
        assert seen == keys

    def test_fleet_routines_within_an_org_or_a_scope_only(self, store: Store) -> None:
        _fleet(store)
        org_b = store.fleet_routines(org="org-b", limit=100)
        assert {(r.org, r.uid) for r in org_b} == {("org-b", "user-1")}
        assert [r.routine_id for r in org_b] == sorted(IDS)
        one = store.fleet_routines(org="org-a", uid="user-2", limit=100)
        assert {r.scope for r in one} == {Scope("org-a", "user-2")}
        # a key after the org's last row ends the org's range (the next org is never read)
        assert store.fleet_routines(org="org-a", after=("org-a", "user-2", "b")) == []

    def test_deleted_routines_are_listed_with_their_tombstone(self, store: Store) -> None:
        register(store, "gone")
        store.delete_routine(SCOPE, "gone", now=REGISTERED)
        (row,) = store.fleet_routines()
        assert row.deleted_at == REGISTERED

    @pytest.mark.parametrize(
        ("call", "kw"),
        [
            ("fleet_routines", {"after": ("a", "b")}),
            ("fleet_routines", {"after": ("a", "b", 3)}),
            ("fleet_routines", {"uid": "user-1"}),
            ("fleet_routines", {"limit": 1.5}),
            ("fleet_scopes", {"after": ("a",)}),
            ("fleet_scopes", {"org": "a\x00"}),
            ("fleet_scopes", {"limit": True}),
        ],
    )
    def test_bad_arguments_are_refused(self, store: Store, call: str, kw: dict[str, object]) -> None:
        with pytest.raises(InvalidInput):
            getattr(store, call)(**kw)
