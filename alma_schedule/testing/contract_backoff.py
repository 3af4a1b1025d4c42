"""Contract: the planning back-off a store applies equals :mod:`alma_schedule.policies.backoff`.
docs/architecture.md, section "The modules, in detail" (testing/contract_backoff.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.model import Defer, Routine
from alma_schedule.policies import backoff
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import MINUTE, SCOPE, T0, TIMERS, fire_due, raising, register
from alma_schedule.testing.contract_streak import PROPERTY

_EXAMPLES = itertools.count()


def _answering(decision: Defer) -> Callable[[Routine], Defer]:
    return lambda routine: decision


class BackoffContract:
    @PROPERTY
    @given(plans=st.lists(st.sampled_from(["raise", "defer", "fire"]), min_size=1, max_size=8))
    def test_the_back_off_follows_the_policy(self, store: Store, plans: list[str]) -> None:
        routine_id = f"backoff-{next(_EXAMPLES)}"
        register(store, routine_id, next_due_at=T0)
        model = backoff.CLEAR
        now = T0
        for plan in plans:
            row = store.get_routine(SCOPE, routine_id)
            assert row is not None and row.next_due_at is not None
            now = max(now, row.next_due_at, row.defer_until or now)
            later = Defer(now + 7 * MINUTE, "no plan")
            decide = {"raise": raising, "defer": _answering(later), "fire": fire_due}[plan]
            batch = store.claim_due(now, 1000, decide, TIMERS)
            mine = [d for d in batch.deferred if d.routine_id == routine_id]
            if plan == "fire":
                assert mine == [] and [r.routine_id for r in batch.claimed].count(routine_id) == 1
                model = backoff.CLEAR
            else:
                if plan == "raise":
                    until = backoff.retry_at(now, model.error_count, TIMERS.defer_first, TIMERS.defer_max)
                    error = repr(ValueError(f"cannot plan {routine_id}"))
                else:
                    until, error = later.until, later.error
                [d] = mine
                assert (d.until, d.error, d.first) == (until, error, backoff.first_deferral(model.error_count))
                model = backoff.deferred(model.error_count, until, error)
            row = store.get_routine(SCOPE, routine_id)
            assert row is not None
            assert backoff.PlanningBackoff(row.defer_until, row.last_error, row.error_count) == model, plans
            assert backoff.held_back(row.defer_until, now) == (plan != "fire")
        store.delete_routine(SCOPE, routine_id, now=now)  # out of the later examples' due scans
