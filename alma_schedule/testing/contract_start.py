"""Contract: what the engine's ``start`` gives (``in_window`` and the joined routine).

``start(..., in_window=True)`` is the engine's only call before a runner: the CAS itself refuses a
fire past its window (``expired``, nothing written, the tick's sweep records ``skipped(missed)``),
and a winner gets the routine row its CAS joined, so no read precedes or follows it."""

from __future__ import annotations

from alma_schedule.model import RunKey
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import SCOPE, SECOND, T0, claim, register


class StartContract:
    def test_start_in_window_refuses_a_closed_window(self, store: Store) -> None:
        register(store)
        rec = claim(store)
        late = store.start(rec.key, now=rec.expires_at, in_window=True)
        assert (late.won, late.reason, late.record, late.routine) == (False, "expired", rec, None)
        assert store.get(RunKey.of(SCOPE, "r1", rec.run_id)) == rec  # nothing written
        store.set_paused(SCOPE, "r1", "operator", now=T0, next_due_at=None)
        paused = store.start(rec.key, now=rec.expires_at + SECOND, in_window=True)
        assert (paused.reason, paused.record) == ("expired", rec)  # past its window: not even skipped
        store.set_paused(SCOPE, "r1", None, now=T0, next_due_at=None)
        won = store.start(rec.key, now=rec.expires_at - SECOND, in_window=True, owner="req-1")
        assert won.won and won.record is not None and won.record.state == "running"
        assert won.record.owner == "req-1"

    def test_start_without_in_window_ignores_the_window(self, store: Store) -> None:
        register(store)
        rec = claim(store)
        assert store.start(rec.key, now=rec.expires_at + SECOND).won

    def test_a_won_start_returns_the_routine_it_joined(self, store: Store) -> None:
        register(store)
        rec = claim(store)
        won = store.start(rec.key, now=T0 + SECOND, in_window=True)
        assert won.won and won.routine is not None
        assert won.routine == store.get_routine(SCOPE, "r1")
        assert "routine" not in won.to_dict()
        again = store.start(rec.key, now=T0 + 2 * SECOND, in_window=True)
        assert (again.won, again.reason, again.routine) == (False, "duplicate", None)
