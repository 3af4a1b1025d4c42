"""Contract: every store call, given hostile values (hypothesis), accepts them or refuses them with an
``alma_schedule.errors`` type, and a refusal leaves every table as it was.
docs/architecture.md, section "The modules, in detail" (testing/contract_hostile.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.model import (
    BLOCKED_WHY,
    ROUTINE_STATES,
    Backfill,
    BackfillStep,
    Ceiling,
    Defer,
    NotDue,
    Routine,
    RunKey,
    RunResult,
    TickEndAsk,
)
from alma_schedule.model.calendar import Calendar
from alma_schedule.model.overdue import OverdueFire
from alma_schedule.stores.base import Store
from alma_schedule.testing.builders import (
    DAY,
    HOUR,
    MINUTE,
    OTHER_ORG,
    SCOPE,
    T0,
    TIMERS,
    fire_next_due,
    make_routine,
    register,
    run_in,
)
from alma_schedule.testing.hostile import (
    HOSTILE,
    anything,
    attempt,
    instants,
    json_values,
    or_hostile,
    spans,
    texts,
)

Draw = Callable[[st.SearchStrategy[Any]], Any]
StoreOp = Callable[[Store, Draw], Callable[[], Any]]

SCOPES = or_hostile(SCOPE, OTHER_ORG)
IDS = or_hostile("r1", "r2", "r3", "missing")
NOW = st.one_of(instants(), anything())
OPT_NOW = st.one_of(st.none(), instants(), anything())
LIMITS = or_hostile(10, 0, -1)
ANNOTATE_KEYS = st.one_of(
    st.sampled_from(["result_text", "cost_micros", "caps_crossed", "erase_at"]), texts(), st.integers()
)
STATES = ("claimed", "running", "submitted", "collecting")
OWNERS = or_hostile("task-1", "task-1/0")
OPT_TEXT = st.one_of(st.none(), anything())
FIRE_KEYS = st.one_of(st.tuples(or_hostile("org-a"), or_hostile("user-1"), IDS, NOW), anything())
OVERDUE_FIRES = st.one_of(
    st.lists(st.builds(OverdueFire, or_hostile("org-a"), or_hostile("user-1"), IDS, NOW, NOW), max_size=3),
    anything(),
)
CALENDARS = or_hostile(Calendar("us", "US", 2027, 2027, (("2027-07-05", "Independence Day (observed)"),)))
CALENDAR_NAMES = or_hostile("us", "missing")


def _seed(store: Store) -> None:
    if list(store.iter_routines()):
        return
    for i, state in enumerate(STATES):
        run_in(store, state, f"r{i + 1}")
    register(store, "r9", scope=OTHER_ORG)
    register(store, "r5", next_due_at=T0 + HOUR, last_fire=T0 - 10 * MINUTE)  # idle, with a pending backfill
    store.put_backfill(Backfill(SCOPE.org, SCOPE.uid, "r5", T0 - HOUR, T0, T0 - HOUR, 100), now=T0)


def _key(store: Store, draw: Draw) -> Any:
    if draw(st.integers(0, 3)) == 0:
        return draw(anything())
    if draw(st.booleans()):  # a real run, through a drawn index (so the draw does not depend on the store)
        runs = store.list_runs(SCOPE, limit=20)
        i = draw(st.integers(0, 19))
        if runs:
            return runs[i % len(runs)].key
    return RunKey.of(SCOPE, draw(st.sampled_from(["r1", "r2"])), draw(st.sampled_from(["manual:1", "x"])))


def _routine(draw: Draw) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(anything())
    field = draw(
        st.sampled_from(
            [
                "org",
                "uid",
                "routine_id",
                "kind",
                "schedule",
                "definition",
                "registered_at",
                "config_revision",
                "last_fire",
                "next_due_at",
                "tzdata_version",
                "paused_reason",
                "consecutive_failures",
            ]
        )
    )
    value = draw(json_values() if field in ("schedule", "definition") else anything())
    return dataclasses.replace(make_routine(draw(st.sampled_from(["r1", "new"]))), **{field: value})


def _result(draw: Draw) -> Any:
    if draw(st.integers(0, 4)) == 0:
        return draw(anything())
    return RunResult(
        draw(or_hostile("completed", "failed", "submitted")),
        draw(st.one_of(st.none(), or_hostile("ok", "provider_error"))),
        draw(st.one_of(st.none(), or_hostile(5))),
        draw(st.one_of(st.none(), or_hostile("ValueError"))),
    )


def _decide(draw: Draw) -> Callable[[Routine], Any]:
    answer = draw(
        st.one_of(
            st.builds(NotDue, st.one_of(st.none(), instants(), anything())),
            st.builds(Defer, st.one_of(instants(), anything()), st.one_of(texts_or_none(), anything())),
            anything(),
        )
    )
    return lambda routine: fire_next_due()(routine) if answer is None else answer


def _derive(draw: Draw) -> Callable[[Routine], Any]:
    answer = draw(OPT_NOW)
    return lambda routine: answer


def _backfill(draw: Draw) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(anything())
    row = Backfill(SCOPE.org, SCOPE.uid, draw(st.sampled_from(["r1", "r5", "new"])), T0 - HOUR, T0, T0 - HOUR, 10)
    field = draw(st.sampled_from(["org", "uid", "routine_id", "from_at", "to_at", "next_at", "max_fires"]))
    return dataclasses.replace(row, **{field: draw(anything())})


def _plan(draw: Draw) -> Callable[[Routine, Backfill], Any]:
    fire = draw(st.one_of(instants(), anything()))
    step = draw(
        st.one_of(
            st.none(),
            st.builds(
                BackfillStep,
                st.one_of(st.just(((draw(or_hostile("2026-03-01T11:30:00Z")), fire),)), anything()),
                st.one_of(instants(), anything()),
                st.one_of(instants(), anything()),
                st.booleans(),
            ),
            anything(),
        )
    )
    return lambda routine, backfill: step


def _tick_end(store: Store, draw: Draw) -> Callable[[], Any]:
    """``begin_tick_end`` of a hostile ask (at times not an ask at all), its value called inside."""
    if draw(st.integers(0, 9)) == 0:
        ask: Any = draw(anything())
    else:
        ask = TickEndAsk(
            draw(NOW), draw(or_hostile(3, 0)), draw(st.one_of(st.none(), or_hostile(0.5))), draw(OPT_TEXT),
            erroring_limit=draw(st.one_of(st.none(), LIMITS)), run_time_limit=draw(st.one_of(st.none(), spans())),
        )  # fmt: skip

    def call() -> Any:
        with store.begin_tick_end(ask) as finish:
            return finish()

    return call


def texts_or_none() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.text(max_size=20))


def _pairs(draw: Draw) -> Any:
    """``put_routines``' input: hostile ``(routine, expected_revision)`` pairs, at times not a list at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(anything())
    return [(_routine(draw), draw(st.one_of(st.none(), anything()))) for _ in range(draw(st.integers(0, 3)))]


OPS: dict[str, StoreOp] = {
    "put_routine": lambda s, d: (
        lambda: s.put_routine(_routine(d), now=d(NOW), expected_revision=d(st.one_of(st.none(), anything())))
    ),
    "put_routines": lambda s, d: lambda: s.put_routines(_pairs(d), now=d(NOW)),
    "set_enabled": lambda s, d: (
        lambda: s.set_enabled(d(SCOPES), d(IDS), d(anything()), now=d(NOW), next_due_at=d(OPT_NOW))
    ),
    "set_paused": lambda s, d: (
        lambda: s.set_paused(d(SCOPES), d(IDS), d(st.one_of(st.none(), anything())), now=d(NOW), next_due_at=d(OPT_NOW))
    ),
    "delete_routine": lambda s, d: lambda: s.delete_routine(d(SCOPES), d(IDS), now=d(NOW), actor=d(OPT_TEXT)),
    "get_routine": lambda s, d: lambda: s.get_routine(d(SCOPES), d(IDS), include_deleted=d(anything())),
    "list_routines": lambda s, d: (
        lambda: s.list_routines(d(SCOPES), include_deleted=d(anything()), limit=d(LIMITS), after=d(IDS))
    ),
    "routine_versions": lambda s, d: lambda: s.routine_versions(d(SCOPES), d(IDS)),
    "routine_events": lambda s, d: lambda: s.routine_events(d(SCOPES), d(IDS), limit=d(LIMITS)),
    "prune_events": lambda s, d: lambda: s.prune_events(d(NOW), d(LIMITS)),
    "claim_due": lambda s, d: lambda: s.claim_due(d(NOW), d(LIMITS), _decide(d), TIMERS),
    "claim_manual": lambda s, d: lambda: s.claim_manual(_key(s, d), now=d(NOW), expires_at=d(NOW), resend_at=d(NOW)),
    "take_resends": lambda s, d: lambda: s.take_resends(d(NOW), d(LIMITS), TIMERS, send=d(anything())),
    "take_polls": lambda s, d: lambda: s.take_polls(d(NOW), d(LIMITS), TIMERS),
    "start": lambda s, d: (
        lambda: s.start(_key(s, d), now=d(NOW), owner=d(st.one_of(st.none(), OWNERS)), in_window=d(st.booleans()))
    ),
    "submit": lambda s, d: (
        lambda: s.submit(
            _key(s, d),
            now=d(NOW),
            batch_id=d(anything()),
            deadline=d(NOW),
            next_poll_at=d(NOW),
            target_task_id=d(st.one_of(st.none(), anything())),
        )
    ),
    "begin_collecting": lambda s, d: lambda: s.begin_collecting(_key(s, d), now=d(NOW)),
    "annotate": lambda s, d: (
        lambda: s.annotate(
            _key(s, d),
            d(st.one_of(st.dictionaries(ANNOTATE_KEYS, anything(), max_size=2), anything())),
        )
    ),
    "finish": lambda s, d: (
        lambda: s.finish(
            _key(s, d),
            _result(d),
            now=d(NOW),
            timers=TIMERS,
            from_states=d(st.one_of(st.none(), st.lists(or_hostile(*STATES), max_size=2), anything())),
        )
    ),
    "record": lambda s, d: (
        lambda: s.record(_key(s, d), d(or_hostile("failed", "completed")), d(or_hostile("reconciled")), now=d(NOW))
    ),
    "mark_blocked": lambda s, d: (
        lambda: s.mark_blocked(
            _key(s, d),
            why=d(or_hostile(*sorted(BLOCKED_WHY))),
            now=d(NOW),
            cost_micros=d(st.one_of(st.none(), or_hostile(5))),
        )
    ),
    "running_of": lambda s, d: lambda: s.running_of(d(OWNERS), d(LIMITS)),
    "reserve": lambda s, d: (
        lambda: s.reserve(
            _key(s, d),
            d(or_hostile(DAY)),
            d(or_hostile(10, 0)),
            d(st.one_of(st.lists(st.builds(Ceiling, or_hostile("org:x"), or_hostile(100)), max_size=2), anything())),
        )
    ),
    "release": lambda s, d: lambda: s.release(_key(s, d)),
    "spend": lambda s, d: lambda: s.spend(d(or_hostile("org:x")), d(or_hostile(DAY))),
    "put_backfill": lambda s, d: lambda: s.put_backfill(_backfill(d), now=d(NOW)),
    "get_backfill": lambda s, d: lambda: s.get_backfill(d(SCOPES), d(IDS)),
    "cancel_backfill": lambda s, d: lambda: s.cancel_backfill(d(SCOPES), d(IDS), now=d(NOW)),
    "claim_backfills": lambda s, d: lambda: s.claim_backfills(d(NOW), d(LIMITS), _plan(d), TIMERS),
    "get": lambda s, d: lambda: s.get(_key(s, d)),
    "list_runs": lambda s, d: (
        lambda: s.list_runs(
            d(SCOPES),
            routine_id=d(st.one_of(st.none(), IDS)),
            state=d(st.one_of(st.none(), or_hostile(*STATES))),
            since=d(OPT_NOW),
            limit=d(LIMITS),
            before=d(st.one_of(st.none(), st.tuples(instants(), anything()), anything())),
        )
    ),
    "last_completed_delivery": lambda s, d: lambda: s.last_completed_delivery(d(SCOPES), d(IDS)),
    "peek_due": lambda s, d: lambda: s.peek_due(d(NOW), d(LIMITS)),
    "peek_resends": lambda s, d: lambda: s.peek_resends(d(NOW), d(LIMITS)),
    "peek_polls": lambda s, d: lambda: s.peek_polls(d(NOW), d(LIMITS)),
    "system_routines": lambda s, d: (
        lambda: s.system_routines(
            kind=d(st.one_of(st.none(), or_hostile("test"))),
            state=d(st.one_of(st.none(), or_hostile(*ROUTINE_STATES))),
            limit=d(LIMITS),
            after=d(st.one_of(st.none(), st.tuples(or_hostile("org-a", "org-b"), or_hostile("user-1"), IDS), OPT_TEXT)),
        )
    ),
    "system_routine_counts": lambda s, d: (
        lambda: s.system_routine_counts(
            kind=d(st.one_of(st.none(), or_hostile("test"))),
            state=d(st.one_of(st.none(), or_hostile(*ROUTINE_STATES))),
        )
    ),
    "list_inactive": lambda s, d: lambda: s.list_inactive(d(LIMITS)),
    "blocked": lambda s, d: lambda: s.blocked(d(NOW), d(spans()), d(LIMITS)),
    "probe_tick": lambda s, d: lambda: s.probe_tick(d(NOW), d(spans())),
    "stuck": lambda s, d: lambda: s.stuck(d(NOW), d(spans()), d(LIMITS)),
    "unstarted": lambda s, d: lambda: s.unstarted(d(NOW), d(spans()), d(LIMITS)),
    "iter_routines": lambda s, d: lambda: list(s.iter_routines(d(or_hostile(2, 1000)))),
    "heartbeat": lambda s, d: lambda: s.heartbeat(d(NOW)),
    "last_tick": lambda s, d: s.last_tick,
    "next_wake_at": lambda s, d: s.next_wake_at,
    "peek_wake": lambda s, d: lambda: s.peek_wake(d(NOW)),
    "erroring": lambda s, d: lambda: s.erroring(d(LIMITS)),
    "log_tick": lambda s, d: (
        lambda: s.log_tick(d(NOW), d(or_hostile(3, 0)), d(st.one_of(st.none(), or_hostile(0.5))), d(OPT_TEXT))
    ),
    "record_tick": lambda s, d: (
        lambda: s.record_tick(d(NOW), d(or_hostile(3, 0)), d(st.one_of(st.none(), or_hostile(0.5))), d(OPT_TEXT))
    ),
    "begin_tick_end": _tick_end,
    "tick_log": lambda s, d: lambda: s.tick_log(d(LIMITS)),
    "count_routines": lambda s, d: lambda: s.count_routines(d(or_hostile(10_000, 1, 0))),
    "prune": lambda s, d: lambda: s.prune(d(NOW)),
    "prune_runs": lambda s, d: lambda: s.prune_runs(d(NOW), d(LIMITS)),
    "purge_deleted": lambda s, d: lambda: s.purge_deleted(d(LIMITS)),
    "erase_results": lambda s, d: lambda: s.erase_results(d(SCOPES)),
    "erase_expired_results": lambda s, d: lambda: s.erase_expired_results(d(NOW), d(LIMITS)),
    "reconcile_zone_data": lambda s, d: (
        lambda: s.reconcile_zone_data(_derive(d), d(or_hostile("2026a")), limit=d(LIMITS))
    ),
    "reindex": lambda s, d: (
        lambda: s.reindex(_derive(d), tzdata_version=d(st.one_of(st.none(), anything())), batch=d(LIMITS))
    ),
    # business calendars (system data: stores/calendars.py)
    "put_calendar": lambda s, d: (
        lambda: s.put_calendar(d(CALENDARS), now=d(NOW), expected_version=d(st.one_of(st.none(), or_hostile(0, 1))))
    ),
    "get_calendar": lambda s, d: lambda: s.get_calendar(d(CALENDAR_NAMES)),
    "list_calendars": lambda s, d: s.list_calendars,
    "calendar_users": lambda s, d: lambda: s.calendar_users(d(CALENDAR_NAMES), d(LIMITS)),
    "delete_calendar": lambda s, d: lambda: s.delete_calendar(d(CALENDAR_NAMES)),
    # the did-not-run alarm (stores/overdue.py)
    "overdue": lambda s, d: lambda: s.overdue(d(NOW), d(LIMITS)),
    "take_alerts": lambda s, d: lambda: s.take_alerts(d(OVERDUE_FIRES), now=d(NOW), lease_until=d(NOW)),
    "alert_state": lambda s, d: lambda: s.alert_state(d(FIRE_KEYS)),
    "alert_retry": lambda s, d: lambda: s.alert_retry(d(FIRE_KEYS), lease_until=d(NOW)),
    "alert_delivered": lambda s, d: lambda: s.alert_delivered(d(FIRE_KEYS), now=d(NOW)),
}


class HostileContract:
    @pytest.mark.parametrize("op", list(OPS))
    @HOSTILE
    @given(data=st.data())
    def test_hostile_store_calls_are_accepted_or_refused_typed(
        self, store: Store, op: str, data: st.DataObject
    ) -> None:
        _seed(store)
        attempt(store, OPS[op](store, data.draw))

    def test_the_seed_is_what_the_calls_meet(self, store: Store) -> None:
        _seed(store)
        assert sorted(r.state for r in store.list_runs(SCOPE)) == sorted(STATES)
        assert store.get_routine(OTHER_ORG, "r9") is not None

    def test_every_store_call_is_covered(self, store: Store) -> None:
        from alma_schedule.stores.calendars import CalendarStore
        from alma_schedule.stores.overdue import OverdueStore
        from alma_schedule.stores.system import SystemStore

        halves = (Store, SystemStore, CalendarStore, OverdueStore)  # the protocol, its system half, its parts
        protocol = {n for k in halves for n in vars(k) if not n.startswith("_") and callable(getattr(Store, n))}
        assert protocol - {"close"} == set(OPS)
