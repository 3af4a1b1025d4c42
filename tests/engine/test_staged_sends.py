"""The engine's side of a staged dispatch (engine/claims.py, engine/outbox.py): the staged send is
used only for the very records the batch claimed, every other staging is discarded, a store without
``staging`` is called as before, and a send held in the outbox that an interrupted flush never
reached is discarded (its producer back in the pool)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from engine_support import T0, RecordingDispatcher, spec

from alma_schedule.engine.claims import _sender
from alma_schedule.engine.outbox import Outbox
from alma_schedule.model import ClaimBatch, RunRecord
from alma_schedule.stores.fast import takes_staging as _takes_staging
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.testing.builders import TIMERS, fire_due_long, register


class FakeStaged:
    """A staged dispatch's three operations, recorded (the real one: tests/celery/test_staged.py)."""

    def __init__(self, runs: Sequence[RunRecord]) -> None:
        self.runs = tuple(runs)
        self.sent: list[Sequence[RunRecord]] = []
        self.discards = 0

    def matches(self, runs: Sequence[RunRecord]) -> bool:
        return len(runs) == len(self.runs) and all(a is b for a, b in zip(runs, self.runs, strict=True))

    def send(self, runs: Sequence[RunRecord]) -> None:
        self.sent.append(runs)

    def discard(self) -> None:
        self.discards += 1


def _records(n: int) -> list[RunRecord]:
    """``n`` claimed records (claimed on a memory store)."""
    store = MemoryStore()
    for i in range(n):
        register(store, f"r{i}", next_due_at=T0)
    return list(store.claim_due(T0, 100, fire_due_long, TIMERS).claimed)


def test_the_staged_send_is_chosen_only_for_the_records_claimed() -> None:
    runs = _records(3)
    plain: list[Sequence[RunRecord]] = []
    staged = FakeStaged(runs)
    send, discard = _sender(plain.append, [staged], ClaimBatch(tuple(runs), (), (), ()))
    assert (send, discard) == (staged.send, staged.discard) and staged.discards == 0

    fewer = FakeStaged(runs)  # a fire lost at the INSERT: the batch claimed fewer
    send, discard = _sender(plain.append, [fewer], ClaimBatch(tuple(runs[:2]), (), (), ()))
    assert (send, discard, fewer.discards) == (plain.append, None, 1)

    nothing, other = FakeStaged(runs), FakeStaged(runs)  # nothing claimed; a second staging: dropped
    send, discard = _sender(plain.append, [nothing, other], ClaimBatch((), (), (), ()))
    assert (send, nothing.discards, other.discards) == (plain.append, 1, 1)


def test_an_interrupted_flush_discards_the_held_sends_it_did_not_reach() -> None:
    runs = _records(1)
    first, last = FakeStaged(runs), FakeStaged(runs)

    def interrupted(_: Sequence[RunRecord]) -> None:
        raise KeyboardInterrupt  # a BaseException, as the task's time limit

    outbox = Outbox()
    outbox.hold("run", first.send, runs, first.discard)
    outbox.hold("run", interrupted, runs, lambda: pytest.fail("the interrupted send cleans up itself"))
    outbox.hold("run", last.send, runs, last.discard)
    with pytest.raises(KeyboardInterrupt):
        outbox.flush()
    assert (len(first.sent), first.discards) == (1, 0)
    assert (last.sent, last.discards) == ([], 1)
    assert not outbox.pending


def test_holding_nothing_discards_at_once() -> None:
    staged = FakeStaged([])
    outbox = Outbox()
    outbox.hold("run", staged.send, [], staged.discard)
    assert (outbox.pending, staged.discards) == (False, 1)


def test_a_store_without_staging_is_called_as_before() -> None:
    class OldStore:
        def claim_due(self, now: Any, limit: int, decide: Any, timers: Any, scan: Any = None) -> Any: ...

    class Wrapping:
        def claim_due(self, *a: Any, **kw: Any) -> Any: ...

    assert _takes_staging(MemoryStore()) and _takes_staging(Wrapping())
    assert not _takes_staging(OldStore()) and not _takes_staging(object())


class StagingDispatcher(RecordingDispatcher):
    """Stages as the Celery dispatcher does (the real one: tests/celery/test_staged.py), recording the
    stagings; ``refuse``: the first staging raises, as for a broker that is down."""

    def __init__(self, refuse: bool = False) -> None:
        super().__init__()
        self.refuse, self.staged = refuse, 0
        self.flushed: list[RunRecord] = []

    def stage_runs(self, runs: Sequence[RunRecord]) -> FakeStaged:
        self.staged += 1
        if self.refuse:
            raise ConnectionError("the broker is down")
        made = FakeStaged(runs)
        made.send = lambda sent: self.flushed.extend(sent)  # type: ignore[method-assign]
        return made


@pytest.mark.postgres
@pytest.mark.parametrize("store", ["pg"], indirect=True)
@pytest.mark.parametrize("refuse", [False, True])
def test_a_tick_sends_its_staged_batches_and_stops_staging_after_a_refusal(make, clock, store, refuse) -> None:
    disp = StagingDispatcher(refuse=refuse)
    sched = make(dispatcher=disp, claim_limit=3, tick_claim_workers=1)
    for i in range(10):
        sched.register(spec(f"r{i:02d}", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    report = sched.tick()
    assert len(report.claimed) == 10
    if refuse:  # one staging tried, refused; every batch sent as usual after its commit
        assert disp.staged == 1 and disp.flushed == [] and len(disp.runs) == 10
    else:  # every batch staged, and its staged messages flushed: nothing sent another way
        assert disp.staged == 4 and len(disp.flushed) == 10 and disp.runs == []
    assert sorted(str(k) for k in report.claimed) == sorted(str(r.key) for r in disp.runs + disp.flushed)
