"""Contract: bad input is a typed error before anything is written; odd but valid ids round-trip exactly."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import pytest

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Ceiling, RunKey, Scope
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    DAY,
    HOUR,
    MINUTE,
    SCOPE,
    T0,
    everything,
    make_routine,
    register,
    run_in,
)

#: Ids no backend may store: empty, too long, NUL, a lone surrogate (not UTF-8), a control character.
BAD_IDS = ["", "x" * 10_000, "a\x00b", "bad\ud800id", "line\nbreak"]
BAD_ID_NAMES = ["empty", "10000_chars", "nul", "lone_surrogate", "newline"]
#: Ids every backend must store verbatim (statements are parameterised).
ODD_IDS = [
    "o'brien",
    'say "hi"',
    "x'; DROP TABLE runs; --",
    "%_\\*?[]",
    "\u00fcn\u00efc\u00f8d\u00e9 \u2603 \U0001f600",
    "$1 :name ?",
    "a" * 200,
]
ODD_ID_NAMES = [
    "quote",
    "double_quote",
    "injection",
    "like_wildcards",
    "unicode",
    "placeholders",
    "200_chars",
]
#: Definitions that are not JSON (or that PostgreSQL's jsonb cannot hold).
BAD_BODIES: list[Any] = [
    {"x": object()},
    {"x": {1, 2}},
    {"x": b"bytes"},
    {"x": float("nan")},
    {"x": float("inf")},
    {1: "non-text key"},
    {"x": "nul\x00inside"},
    {"x": "lone \ud800 surrogate"},
    ["not", "an", "object"],
]
BAD_BODY_NAMES = ["object", "set", "bytes", "nan", "inf", "int_key", "nul", "lone_surrogate", "list"]


class InputContract:
    @pytest.mark.parametrize("bad", BAD_IDS, ids=BAD_ID_NAMES)
    @pytest.mark.parametrize("field", ["org", "uid", "routine_id"])
    def test_bad_ids_are_refused_before_any_write(self, store: Store, field: str, bad: str) -> None:
        changes: dict[str, Any] = {field: bad}
        routine = dataclasses.replace(make_routine("r1"), **changes)
        with pytest.raises(InvalidInput):
            store.put_routine(routine, now=T0)
        assert list(store.iter_routines()) == []

    @pytest.mark.parametrize("bad", BAD_IDS, ids=BAD_ID_NAMES)
    def test_bad_ids_on_tenant_calls(self, store: Store, bad: str) -> None:
        register(store)
        before = everything(store)
        with pytest.raises(InvalidInput):
            store.claim_manual(RunKey.of(SCOPE, "r1", bad), now=T0, expires_at=T0 + HOUR, resend_at=T0 + MINUTE)
        with pytest.raises(InvalidInput):
            store.claim_manual(RunKey.of(SCOPE, bad, "manual:1"), now=T0, expires_at=T0 + HOUR, resend_at=T0 + MINUTE)
        with pytest.raises(InvalidInput):
            store.set_paused(Scope(bad, "u"), "r1", "operator", now=T0, next_due_at=None)
        with pytest.raises(InvalidInput):
            store.delete_routine(SCOPE, bad, now=T0)
        with pytest.raises(InvalidInput):
            store.record(RunKey.of(SCOPE, "r1", bad), "failed", "reconciled", now=T0)
        assert everything(store) == before

    @pytest.mark.parametrize("odd", ODD_IDS, ids=ODD_ID_NAMES)
    def test_odd_ids_round_trip_exactly(self, store: Store, odd: str) -> None:
        scope = Scope(odd.replace("/", "-"), odd.replace("/", "-"))
        saved = store.put_routine(make_routine(odd, scope=scope), now=T0)
        assert (saved.org, saved.uid, saved.routine_id) == (scope.org, scope.uid, odd)
        got = store.get_routine(scope, odd)
        assert got == saved
        assert [r.routine_id for r in store.list_routines(scope)] == [odd]
        res = store.claim_manual(RunKey.of(scope, odd, odd), now=T0, expires_at=T0 + HOUR, resend_at=T0 + MINUTE)
        assert res.won and res.record is not None and res.record.run_id == odd
        key = RunKey(scope.org, scope.uid, odd, odd)
        assert store.start(key, now=T0).won
        assert [r.run_id for r in store.list_runs(scope)] == [odd]
        assert store.get(RunKey.of(scope, odd, odd)) == store.list_runs(scope)[0]
        assert store.get_routine(Scope("org-a", "user-1"), odd) is None

    @pytest.mark.parametrize("body", BAD_BODIES, ids=BAD_BODY_NAMES)
    def test_non_json_bodies_are_refused_before_any_write(self, store: Store, body: Any) -> None:
        with pytest.raises(InvalidInput):
            store.put_routine(dataclasses.replace(make_routine("r1"), definition=body), now=T0)
        with pytest.raises(InvalidInput):
            store.put_routine(dataclasses.replace(make_routine("r2"), schedule=body), now=T0)
        assert list(store.iter_routines()) == []
        first = register(store, "r3")
        with pytest.raises(InvalidInput):
            changed = dataclasses.replace(make_routine("r3"), definition=body, config_revision="other")
            store.put_routine(changed, now=T0, expected_revision=first.config_revision)
        assert store.get_routine(SCOPE, "r3") == first
        assert len(store.routine_versions(SCOPE, "r3")) == 1

    def test_json_text_round_trips(self, store: Store) -> None:
        body = {"q": 'it\'s "quoted" \\ \u2603', "nested": {"list": [1, -2, 3.25, None, False, "x"]}, "": 0}
        saved = store.put_routine(make_routine("r1", definition=body), now=T0)
        got = store.get_routine(SCOPE, "r1")
        assert got is not None and dict(got.definition) == body and dict(saved.definition) == body

    def test_naive_datetimes_are_refused(self, store: Store) -> None:
        naive = datetime(2026, 3, 1, 12, 0)
        with pytest.raises(InvalidInput):
            store.put_routine(make_routine("r1", next_due_at=naive), now=T0)
        assert list(store.iter_routines()) == []

    def test_bad_money_is_refused(self, store: Store) -> None:
        rec = run_in(store, "running")
        before = everything(store)
        for amount, ceilings in [
            (-1, [Ceiling("org:org-a", 100)]),
            (1.5, [Ceiling("org:org-a", 100)]),
            (True, [Ceiling("org:org-a", 100)]),
            (10, [Ceiling("org:org-a", 100), Ceiling("org:org-a", 100)]),
            (10, [Ceiling("", 100)]),
        ]:
            with pytest.raises(InvalidInput):
                store.reserve(rec.key, DAY, amount, ceilings)  # type: ignore[arg-type]
        assert everything(store) == before
        assert store.spend("org:org-a", DAY) == 0

    def test_annotate_refuses_bad_values(self, store: Store) -> None:
        rec = run_in(store, "running")
        before = everything(store)
        for values in ({"result_text": "nul\x00"}, {"cost_micros": -5}, {"caps_crossed": "per_run"}):
            with pytest.raises(InvalidInput):
                store.annotate(rec.key, values)
        assert everything(store) == before
