"""Builders and drivers shared by the store contract suites: fixed instants, routines, decide functions.
docs/architecture.md, section "The modules, in detail" (testing/builders.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from alma_schedule.model import Fire, NotDue, Routine, RunKey, RunRecord, RunResult, Scope
from alma_schedule.settings import Settings, Timers
from alma_schedule.stores.base import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REGISTERED = T0 - timedelta(hours=1)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
SCOPE = Scope("org-a", "user-1")
OTHER_ORG = Scope("org-b", "user-1")
OTHER_UID = Scope("org-a", "user-2")
TIMERS = Timers.from_settings(Settings())
DAY = "2026-03-01"

Decide = Callable[[Routine], Any]


def fire_id(at: datetime) -> str:
    """The schedule run id of a fire instant: ``YYYY-MM-DDTHH:MM:SSZ``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def revision_of(kind: str, schedule: Mapping[str, Any], definition: Mapping[str, Any]) -> str:
    """A content hash standing in for the engine's ``config_revision``."""
    raw = json.dumps([kind, schedule, definition], sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def make_routine(
    routine_id: str = "r1",
    *,
    scope: Scope = SCOPE,
    next_due_at: datetime | None = T0,
    schedule: Mapping[str, Any] | None = None,
    definition: Mapping[str, Any] | None = None,
    kind: str = "test",
    registered_at: datetime = REGISTERED,
    last_fire: datetime | None = None,
    **extra: Any,
) -> Routine:
    """A routine row as the engine would compute it (every minute, due at ``next_due_at``)."""
    schedule = {"every": 60} if schedule is None else schedule
    definition = {"text": "hello"} if definition is None else definition
    return Routine(
        org=scope.org,
        uid=scope.uid,
        routine_id=routine_id,
        kind=kind,
        schedule=schedule,
        definition=definition,
        registered_at=registered_at,
        config_revision=revision_of(kind, schedule, definition),
        last_fire=last_fire,
        next_due_at=next_due_at,
        **extra,
    )


def fire_next_due(step: timedelta = MINUTE, window: timedelta | None = None, *, missed: bool = False) -> Decide:
    """A ``decide`` that fires the routine's ``next_due_at`` and moves the index by ``step``.

    The fire expires after ``window`` (default: at the next fire, like the engine's default).
    """

    def decide(routine: Routine) -> Fire:
        due = routine.next_due_at
        assert due is not None, "claim_due handed decide a routine that is not due"
        return Fire(
            run_id=fire_id(due),
            fire_at=due,
            expires_at=due + (window or step),
            next_due_at=due + step,
            missed=missed,
        )

    return decide


fire_due = fire_next_due()
fire_due_long = fire_next_due(window=HOUR)


def max_runs_decide(max_runs: int, step: timedelta = MINUTE) -> Decide:
    """:data:`fire_due_long` for a routine limited to ``max_runs`` schedule STARTS (the engine's
    ``decide`` carries the limit on the ``Fire`` and answers nothing once the starts reach it; the
    store counts the starts and reads the limit from the routine's schedule)."""

    def decide(routine: Routine) -> Fire | NotDue:
        if routine.schedule_starts >= max_runs:
            return NotDue(None)
        fire: Fire = fire_next_due(step, window=HOUR)(routine)
        return dataclasses.replace(fire, max_runs=max_runs)

    return decide


def raising(routine: Routine) -> Fire:
    """A ``decide`` that cannot plan anything."""
    raise ValueError(f"cannot plan {routine.routine_id}")


class Counting:
    """Wraps a ``decide`` and counts its calls per routine id."""

    def __init__(self, decide: Decide) -> None:
        self.decide = decide
        self.calls: dict[str, int] = {}

    def __call__(self, routine: Routine) -> Any:
        self.calls[routine.routine_id] = self.calls.get(routine.routine_id, 0) + 1
        return self.decide(routine)


# --------------------------------------------------------------------------- drivers


def register(store: Store, routine_id: str = "r1", *, now: datetime = REGISTERED, **kw: Any) -> Routine:
    """``put_routine`` of a fresh :func:`make_routine`."""
    return store.put_routine(make_routine(routine_id, **kw), now=now)


def key_of(routine_id: str, run_id: str, scope: Scope = SCOPE) -> RunKey:
    return RunKey(scope.org, scope.uid, routine_id, run_id)


def claim(store: Store, routine_id: str = "r1", *, now: datetime = T0, decide: Decide = fire_due_long) -> RunRecord:
    """Claim the due fire of one routine at ``now`` and return its ``claimed`` record."""
    batch = store.claim_due(now, 1000, decide, TIMERS)
    mine = [r for r in batch.claimed if r.routine_id == routine_id]
    assert len(mine) == 1, f"expected one claimed fire of {routine_id}, got {batch}"
    return mine[0]


def running(store: Store, routine_id: str = "r1", *, now: datetime = T0, **kw: Any) -> RunRecord:
    rec = claim(store, routine_id, now=now, **kw)
    res = store.start(rec.key, now=now)
    assert res.won and res.record is not None, res
    return res.record


def submitted(store: Store, routine_id: str = "r1", *, now: datetime = T0, **kw: Any) -> RunRecord:
    rec = running(store, routine_id, now=now, **kw)
    res = store.submit(rec.key, now=now, batch_id="batch-1", deadline=now + HOUR, next_poll_at=now + 30 * SECOND)
    assert res.won and res.record is not None, res
    return res.record


def collecting(store: Store, routine_id: str = "r1", *, now: datetime = T0, **kw: Any) -> RunRecord:
    rec = submitted(store, routine_id, now=now, **kw)
    res = store.begin_collecting(rec.key, now=now)
    assert res.won and res.record is not None, res
    return res.record


SECOND = timedelta(seconds=1)
IN_STATE: Mapping[str, Callable[..., RunRecord]] = {
    "claimed": claim,
    "running": running,
    "submitted": submitted,
    "collecting": collecting,
}


def run_in(store: Store, state: str, routine_id: str = "r1", *, now: datetime = T0) -> RunRecord:
    """Register a routine due at ``now`` and drive its fire to ``state`` (a non-terminal state)."""
    register(store, routine_id, next_due_at=now)
    return IN_STATE[state](store, routine_id, now=now)


def cycle(store: Store, result: RunResult, routine_id: str = "r1", *, timers: Timers = TIMERS) -> RunRecord:
    """Claim the routine's next fire at its ``next_due_at``, start it, finish it with ``result``."""
    routine = store.get_routine(SCOPE, routine_id)
    assert routine is not None and routine.next_due_at is not None, routine
    now = routine.next_due_at
    rec = running(store, routine_id, now=now)
    res = store.finish(rec.key, result, now=now, timers=timers)
    assert res.won and res.record is not None, res
    return res.record


def with_threshold(n: int, timers: Timers = TIMERS) -> Timers:
    """``timers`` with ``failure_threshold = n`` (0 = the streak never latches a pause)."""
    return dataclasses.replace(timers, failure_threshold=n)


def everything(store: Store, scopes: Sequence[Scope] = (SCOPE, OTHER_ORG, OTHER_UID)) -> tuple[Any, ...]:
    """A comparable snapshot of every routine and the runs of ``scopes`` (to prove nothing changed)."""
    routines = tuple(store.iter_routines())
    runs = tuple(tuple(store.list_runs(s, limit=100_000)) for s in scopes)
    return routines, runs
