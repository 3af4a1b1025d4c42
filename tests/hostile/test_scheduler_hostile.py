"""Every public operation of ``Scheduler``, on memory, SQLite and PostgreSQL, given hostile values:
each is accepted, or refused with an ``alma_schedule.errors`` type and the store left unchanged
(a dump of every table before and after). Issue 14, defect 8."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hostile_support import OTHER, SCOPE
from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.engine import Scheduler
from alma_schedule.model import RoutineSpec, RunKey
from alma_schedule.testing.hostile import HOSTILE, anything, attempt, instants, json_values, or_hostile

Draw = Callable[[st.SearchStrategy[Any]], Any]
Op = Callable[[Scheduler, Draw], Callable[[], Any]]

SCOPES = or_hostile(SCOPE, OTHER)
IDS = or_hostile("r1", "r2", "missing")
NOW = st.one_of(st.none(), instants(), anything())
SCHEDULES = st.one_of(
    st.sampled_from([{"every": 60}, {"cron": "*/5 * * * *", "tz": "Europe/London"}, {"at": "2026-03-03T00:00:00Z"}]),
    st.dictionaries(st.sampled_from(["every", "cron", "at", "tz", "overlap", "max_runs"]), anything(), max_size=3),
    json_values(),
)


def _pick(draw: Draw, items: list[Any]) -> Any:
    """One of ``items`` (which depend on the store's state) through a drawn index: what is drawn does
    not depend on the state, so hypothesis can replay and shrink an example."""
    i = draw(st.integers(0, 49))
    return items[i % len(items)] if items else "none"


def _run_id(sched: Scheduler, draw: Draw) -> Any:
    if draw(st.booleans()):
        return draw(anything())
    run_ids = [r.run_id for r in sched.store.list_runs(SCOPE, limit=50)]
    return _pick(draw, run_ids)


def _key(sched: Scheduler, draw: Draw) -> Any:
    if draw(st.booleans()):
        return draw(anything())
    run_ids = [r.run_id for r in sched.store.list_runs(SCOPE, limit=50)]
    return RunKey.of(SCOPE, draw(st.sampled_from(["r1", "r2"])), _pick(draw, run_ids))


def _spec(draw: Draw) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(anything())
    return RoutineSpec(
        draw(or_hostile("org-a", "org-b")),
        draw(or_hostile("user-1")),
        draw(or_hostile("r1", "r3", "new")),
        draw(or_hostile("k")),
        draw(SCHEDULES),
        draw(st.one_of(json_values(), st.just({"text": "x"}))),
    )


def _levers(name: str) -> Op:
    return lambda s, d: lambda: getattr(s, name)(d(SCOPES), d(IDS), now=d(NOW), actor=d(ACTORS))


#: An actor (issue 50's audit trail): none, a plain one, or anything hostile.
ACTORS = st.one_of(st.none(), or_hostile("alice@host"))


def _list(s: Scheduler, d: Draw) -> Callable[[], Any]:
    def call() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Scheduler.list is deprecated
            return s.list(d(SCOPES), include_deleted=d(anything()), limit=d(or_hostile(10)), after=d(IDS))

    return call


OPS: dict[str, Op] = {
    "register": lambda s, d: lambda: s.register(_spec(d), now=d(NOW), mode=d(or_hostile("upsert", "create", "update"))),
    "prepare": lambda s, d: lambda: s.prepare(_spec(d), now=d(NOW), mode=d(or_hostile("upsert", "create", "update"))),
    "disable": _levers("disable"),
    "enable": _levers("enable"),
    "pause": lambda s, d: lambda: s.pause(d(SCOPES), d(IDS), d(or_hostile("manual", "operator")), now=d(NOW)),
    "resume": _levers("resume"),
    "delete": _levers("delete"),
    "trigger": _levers("trigger"),
    "get": lambda s, d: lambda: s.get(d(SCOPES), d(IDS)),
    "routines": lambda s, d: (
        lambda: s.routines(d(SCOPES), include_deleted=d(anything()), limit=d(or_hostile(10)), after=d(IDS))
    ),
    "list": _list,
    "versions": lambda s, d: lambda: s.versions(d(SCOPES), d(IDS)),
    "history": lambda s, d: lambda: s.history(d(SCOPES), d(IDS), limit=d(or_hostile(10))),
    "runs": lambda s, d: (
        lambda: s.runs(
            d(SCOPES),
            routine_id=d(st.one_of(st.none(), IDS)),
            state=d(st.one_of(st.none(), or_hostile("running", "completed"))),
            since=d(st.one_of(st.none(), instants(), anything())),
            limit=d(or_hostile(5)),
            before=d(st.one_of(st.none(), st.tuples(instants(), anything()), anything())),
        )
    ),
    "run": lambda s, d: lambda: s.run(d(SCOPES), d(IDS), _run_id(s, d)),
    "decide": lambda s, d: (
        lambda: s.decide(_pick(d, list(s.store.iter_routines())) if d(st.booleans()) else d(anything()), now=d(NOW))
    ),
    "plan": lambda s, d: lambda: s.plan(now=d(NOW)),
    "tick": lambda s, d: lambda: s.tick(now=d(NOW)),
    "execute": lambda s, d: lambda: s.execute(_key(s, d), now=d(NOW)),
    "collect": lambda s, d: lambda: s.collect(_key(s, d), now=d(NOW)),
    "record": lambda s, d: (
        lambda: s.record(
            d(SCOPES),
            d(IDS),
            _run_id(s, d),
            d(or_hostile("failed", "completed", "running")),
            d(or_hostile("reconciled", "provider_error")),
            now=d(NOW),
        )
    ),
    "backfill": lambda s, d: (
        lambda: s.backfill(d(SCOPES), d(IDS), d(NOW), d(NOW), max_fires=d(or_hostile(10, 0)), now=d(NOW))
    ),
    "cancel_backfill": _levers("cancel_backfill"),
    "describe": lambda s, d: (
        lambda: s.describe(d(SCOPES), d(IDS), now=d(NOW), fires=d(or_hostile(5, 0)), runs=d(or_hostile(10, 0)))
    ),
    "report_lost": lambda s, d: (
        lambda: s.report_lost(d(or_hostile("task-1")), d(or_hostile("worker_lost", "time_limit")), now=d(NOW))
    ),
    "now": lambda s, d: lambda: s.now(d(NOW)),
    "reindex": lambda s, d: s.reindex,
}


def test_every_public_operation_is_covered() -> None:
    public = {n for n in dir(Scheduler) if not n.startswith("_") and callable(getattr(Scheduler, n))}
    assert public == set(OPS)


@pytest.mark.parametrize("op", list(OPS))
@HOSTILE
@given(data=st.data())
def test_hostile_calls_are_accepted_or_refused_typed(sched: Scheduler, op: str, data: st.DataObject) -> None:
    call = OPS[op](sched, data.draw)
    attempt(sched.store, call)
