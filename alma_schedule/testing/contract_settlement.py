"""Contract: what a store does to the money equals :mod:`alma_schedule.policies.settlement`.
docs/architecture.md, section "The modules, in detail" (testing/contract_settlement.py).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.model import Ceiling, RunKey, RunRecord, RunResult
from alma_schedule.policies import settlement
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import DAY, HOUR, MINUTE, SCOPE, T0, TIMERS, register
from alma_schedule.testing.contract_streak import PROPERTY

_EXAMPLES = itertools.count()
#: No failure-streak latch here: money is the subject, and a latched pause would refuse the next run.
NO_LATCH = dataclasses.replace(TIMERS, failure_threshold=0)
LIMITS = (1_000, 700)  # of the example's two ceilings
ROUTINES = 2

_routine = st.integers(0, ROUTINES - 1)
OPS = st.one_of(
    st.tuples(st.just("reserve"), _routine, st.integers(0, 600), st.sampled_from([(0,), (1,), (0, 1), (1, 0)])),
    st.tuples(st.just("cost"), _routine, st.integers(0, 300)),
    st.tuples(st.just("finish"), _routine, st.sampled_from(["completed", "failed"]), st.none() | st.integers(0, 300)),
    st.tuples(st.just("record"), _routine, st.sampled_from(["completed", "failed"])),
    st.tuples(st.just("release"), _routine),
)


@dataclass
class _Run:
    """The model of one run's money columns."""

    key: RunKey
    open: bool = True
    reserved: int = 0
    ceilings: tuple[str, ...] = ()
    cost: int = 0


@dataclass
class _Model:
    ceilings: tuple[str, ...]
    spend: dict[str, int] = field(default_factory=dict)
    runs: dict[int, _Run] = field(default_factory=dict)

    def apply(self, run: _Run, money: settlement.Settlement) -> None:
        for move in money.moves:
            self.spend[move.ceiling] = self.spend.get(move.ceiling, 0) + move.spend_delta
        if money.clears:
            run.reserved, run.ceilings = 0, ()


class SettlementContract:
    @PROPERTY
    @given(ops=st.lists(OPS, min_size=1, max_size=12))
    def test_money_follows_the_settlement_policy(self, store: Store, ops: list[tuple[object, ...]]) -> None:
        n = next(_EXAMPLES)
        model = _Model((f"prop-{n}-a", f"prop-{n}-b"))
        limits = dict(zip(model.ceilings, LIMITS, strict=True))
        for r in range(ROUTINES):
            register(store, f"money-{n}-{r}")
        for i, op in enumerate(ops):
            run = self._open(store, model, n, op[1], i)  # type: ignore[arg-type]
            got = self._step(store, model, run, limits, op)
            for c in model.ceilings:
                assert store.spend(c, DAY) == model.spend.get(c, 0), (op, c)
            current = store.get(run.key)
            assert current is not None and (got is None or got == current)
            assert (current.reserved_micros, set(current.reserve_ceilings), current.cost_micros) == (
                run.reserved,
                set(run.ceilings),
                run.cost,
            ), op

    @staticmethod
    def _open(store: Store, model: _Model, n: int, r: int, i: int) -> _Run:
        """Routine ``r``'s open run; a new ``running`` one when its last run ended."""
        run = model.runs.get(r)
        if run is None or not run.open:
            now = T0 + i * MINUTE
            key = RunKey.of(SCOPE, f"money-{n}-{r}", f"manual:{i:03d}")
            assert store.claim_manual(key, now=now, expires_at=now + HOUR, resend_at=now + MINUTE).won
            assert store.start(key, now=now).won
            run = model.runs[r] = _Run(key)
        return run

    @staticmethod
    def _step(
        store: Store, model: _Model, run: _Run, limits: dict[str, int], op: tuple[object, ...]
    ) -> RunRecord | None:
        """Apply ``op`` to the store and to the model; the record the store returned (if any)."""
        name, now = op[0], T0 + HOUR
        if name == "reserve":
            amount, picks = op[2], op[3]
            assert isinstance(amount, int) and isinstance(picks, tuple)
            keys = [model.ceilings[p] for p in picks]
            res = store.reserve(run.key, DAY, amount, [Ceiling(k, limits[k]) for k in keys])
            if run.ceilings:
                assert (res.ok, res.ceiling) == (False, None)
                return res.record
            over = [k for k in keys if not settlement.fits(model.spend.get(k, 0), amount, limits[k])]
            assert (res.ok, res.ceiling) == (not over, over[0] if over else None), op
            if not over:
                for k in keys:
                    model.spend[k] = model.spend.get(k, 0) + amount
                run.reserved, run.ceilings = amount, tuple(keys)
            return res.record
        if name == "cost":
            assert isinstance(op[2], int)
            run.cost = op[2]
            return store.annotate(run.key, {"cost_micros": op[2]})
        if name == "finish":
            outcome, cost = op[2], op[3]
            assert isinstance(outcome, str) and (cost is None or isinstance(cost, int))
            result = (
                RunResult.completed("delivered", cost)
                if outcome == "completed"
                else RunResult.failed("provider_error", cost)
            )
            finished = store.finish(run.key, result, now=now, timers=NO_LATCH)
            assert finished.won, finished
            run.cost = settlement.finish_cost(cost, run.cost)
            model.apply(run, settlement.settle(run.reserved, DAY, run.ceilings, run.cost))
            run.open = False
            return finished.record
        if name == "record":
            assert isinstance(op[2], str)
            recorded = store.record(run.key, op[2], "reconciled", now=now)
            assert recorded.won, recorded
            model.apply(run, settlement.settle(run.reserved, DAY, run.ceilings, run.cost))
            run.open = False
            return recorded.record
        out = store.release(run.key)
        model.apply(run, settlement.release(run.reserved, DAY, run.ceilings))
        return out
