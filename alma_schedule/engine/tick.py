"""The tick (writes) and the plan (reads), step by step as docs/architecture.md tells the flow.
The tick never raises for one routine, a dispatcher or a maintenance step (``errors``); a store
that is down does.
docs/architecture.md, section "The modules, in detail" (engine/tick.py).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from alma_schedule.errors import SchemaMismatch, StoreUnavailable
from alma_schedule.model import (
    Decision,
    Deferral,
    Erroring,
    Fire,
    NotDue,
    PlannedFire,
    PlannedRoutine,
    Resends,
    Routine,
    RunKey,
    RunRecord,
    RunState,
    TickEndAsk,
    TickError,
    TickPlan,
    TickReport,
)
from alma_schedule.model.tick import merge_kinds
from alma_schedule.policies import supersession
from alma_schedule.policies.blocked import blocked_why
from alma_schedule.stores.fast import fast_claims

from . import event_retention, retention
from .backfill import BackfillPlanner
from .calendars import tick_calendars
from .claims import Claims, claim_live
from .decide import Plan
from .decide import planner as make_plan
from .outbox import Outbox, end_of_tick
from .overdue import overdue_step
from .runtime import Runtime
from .zones import reconcile_zones

log = logging.getLogger("alma_schedule.engine")

__all__ = ["ERRORING_LIMIT", "PURGE_LIMIT", "plan", "tick"]

PURGE_LIMIT = 100
#: How many routines that cannot be planned a tick report (and ``plan``) lists; ``erroring_count`` has them all.
ERRORING_LIMIT = 20
ERASE_LIMIT = 1000
T = TypeVar("T")
MAINTENANCE = "<maintenance>"


def _maintain(
    name: str, step: Callable[[], T], errors: list[TickError], fatal: tuple[type[Exception], ...] = ()
) -> T | None:
    """Run one maintenance step; a failure is logged (one line; its traceback at DEBUG) and
    reported, never raised, unless it is one of ``fatal`` (a store that is down or not migrated,
    met by the tick's first step: the tick raises it, as it would at its next read)."""
    try:
        return step()
    except fatal:
        raise
    except Exception as exc:
        trace = exc if log.isEnabledFor(logging.DEBUG) else None
        log.error("tick maintenance %s failed: %s: %s", name, type(exc).__name__, exc, exc_info=trace)
        errors.append(TickError(MAINTENANCE, f"{name}: {type(exc).__name__}"))
        return None


def _erroring(deferrals: Sequence[Deferral]) -> list[TickError]:
    return [TickError(f"{d.org}/{d.uid}/{d.routine_id}", d.error, d.until) for d in deferrals]


def _queue_depth(rt: Runtime) -> int | None:
    try:
        return rt.dispatcher.run_queue_depth()
    except Exception as exc:
        log.warning("run queue depth unknown: %s", type(exc).__name__, exc_info=exc)
        return None


def _claim_backfills(rt: Runtime, at: datetime, claimed: list[RunKey], outbox: Outbox) -> None:
    """After the live claims: at most one backfill fire per idle routine (its own store step), held
    for sending."""
    runs = rt.store.claim_backfills(at, rt.settings.claim_limit, BackfillPlanner(rt, at), rt.timers)
    claimed.extend(r.key for r in runs)
    outbox.hold("run", rt.dispatcher.send_runs, runs)


def _lag_stats(lags: Sequence[float]) -> tuple[int, float | None, float | None]:
    """The tick log's figures of the tick's claims: how many, and their lag (claim minus due
    instant) p50/p95."""
    ordered = sorted(lags)
    p50 = ordered[(len(ordered) - 1) // 2] if ordered else None
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)] if ordered else None
    return len(ordered), p50, p95


def tick(rt: Runtime, now: datetime | None = None) -> TickReport:
    """One tick at ``now`` (clamped to the clock). See the module docstring for the order."""
    at = rt.now(now)
    store, s, timers, dispatcher = rt.store, rt.settings, rt.timers, rt.dispatcher
    planner = make_plan(rt, at)
    kinds: dict[tuple[str, str, str], str] = {}  # routine key -> kind of the routines decided (the claims' label)

    def deciding(routine: Routine) -> Decision:
        kinds[(routine.org, routine.uid, routine.routine_id)] = routine.kind
        return planner(routine)

    claimed: list[RunKey] = []
    lags: list[float] = []
    skipped: list[RunKey] = []
    buffered: list[RunKey] = []
    errors: list[TickError] = []
    outbox = Outbox(s.tick_gc_pause)  # sends held until the tick's next store step (the last ones: :mod:`.outbox`)
    # once per process, then no-op; the tick's first store step: a store down or not migrated raises here
    _maintain("reconcile_zone_data", lambda: reconcile_zones(rt), errors, (StoreUnavailable, SchemaMismatch))
    todo = store.probe_tick(at, s.run_time_limit)  # ONE read: which steps have anything to do
    # the business calendars, for the routines decided below: ONE small read per tick that claims
    warnings = tick_calendars(store, at) if todo.due else ()
    try:
        live = claim_live(rt, at, deciding, outbox) if todo.due else Claims()
    except BaseException:  # a last batch that committed before another raised is still sent now
        outbox.flush()
        raise
    for batch in live.batches:
        claimed.extend(batch.claimed)
        lags.extend(batch.lags)
        skipped.extend(batch.skipped)
        buffered.extend(batch.buffered)
    missed_kinds = merge_kinds(*(batch.missed for batch in live.batches))  # collapsed fires, by kind
    errors.extend(live.errors)
    deferred = live.deferred

    if todo.backfills:
        errors.extend(outbox.flush())
        _claim_backfills(rt, at, claimed, outbox)

    sends, resends = True, Resends()
    if todo.resends or todo.expiries:  # an expiry may release a buffered fire: sent with the re-sends
        errors.extend(outbox.flush())
        depth = _queue_depth(rt)
        sends = depth is None or depth <= s.resend_pause_depth
        resends = store.take_resends(at, s.claim_limit, timers, send=sends)
        outbox.hold("re-send", dispatcher.send_runs, resends.resend)

    polls: list[RunRecord] = []
    if todo.polls:
        errors.extend(outbox.flush())
        polls = store.take_polls(at, s.claim_limit, timers)
        outbox.hold("collect", dispatcher.send_collects, polls)

    purge = todo.purge or bool(resends.expired)  # an expired run may have been a tombstoned routine's last open one
    if todo.expired_results or purge:
        errors.extend(outbox.flush())
    if todo.expired_results:
        _maintain("erase_expired_results", lambda: store.erase_expired_results(at, ERASE_LIMIT), errors)
    if purge:
        _maintain("purge_deleted", lambda: store.purge_deleted(PURGE_LIMIT), errors)
    if retention.wanted(rt, at):  # run_retention on and its cadence due (engine/retention.py)
        errors.extend(outbox.flush())
    pruned = retention.prune_runs(rt, at, lambda step: _maintain("prune_runs", step, errors))
    if event_retention.wanted(rt):  # the audit trail's retention (engine/event_retention.py)
        _maintain("prune_events", lambda: event_retention.prune_events(rt, at), errors)

    # the end: the held sends, and (started before them where it can: .outbox) the heartbeat with the
    # tick's minute, the routines that cannot be planned (a routine this tick deferred carries its
    # planning error now, even if none did at the probe) and the blocked runs
    count, p50, p95 = _lag_stats(lags)
    ask = TickEndAsk(
        at, count, p50, p95,
        erroring_limit=ERRORING_LIMIT if todo.erroring or deferred else None,
        run_time_limit=s.run_time_limit if todo.blocked else None,
    )  # fmt: skip
    parts, send_errors = end_of_tick(fast_claims(store), dispatcher, ask, outbox)
    errors.extend(send_errors)
    next_wake_at: datetime | None = None
    if parts.heartbeat is not None:
        next_wake_at = parts.heartbeat[0]
    elif parts.heartbeat_failed is not None:  # sent, its outcome unknown: reported, never repeated
        errors.append(TickError(MAINTENANCE, f"heartbeat: {parts.heartbeat_failed}"))
    else:
        next_wake_at = _maintain("heartbeat", lambda: store.record_tick(at, count, p50, p95), errors)
    failing = parts.erroring
    if failing is None:
        failing = store.erroring(ERRORING_LIMIT) if ask.erroring_limit is not None else Erroring()
    errors[:0] = _erroring(failing.routines)
    if parts.blocked is not None:
        blocked = list(parts.blocked)
    else:
        blocked = store.blocked(at, s.run_time_limit) if todo.blocked else []
    overdue = overdue_step(rt, at, errors)  # the "did not run" alarm, after the end (engine/overdue.py)
    report = TickReport(
        at=at,
        claimed=tuple(claimed),
        resent=tuple(r.key for r in resends.resend),
        collect=tuple(r.key for r in polls),
        skipped=tuple(skipped),
        blocked=tuple(r.key for r in blocked),
        errors=tuple(errors),
        expired=tuple(r.key for r in resends.expired),
        sends_paused=not sends,
        erroring_count=failing.count,
        next_wake_at=next_wake_at,
        blocked_why=tuple(blocked_why(r, at) for r in blocked),
        buffered=tuple(buffered),
        claimed_kinds=tuple(
            sorted(Counter(kinds.get((k.org, k.uid, k.routine_id), "unknown") for k in claimed).items())
        ),
        missed_kinds=missed_kinds,
        warnings=warnings,
        runs_pruned=pruned,
        overdue=overdue,
    )
    if report.fires_missed:
        log.info("tick %s: %d fire(s) collapsed, counted on their routines", at.isoformat(), report.fires_missed)
    if failing.count:
        log.warning("tick %s: %d routine(s) cannot be planned, e.g. %s", at.isoformat(), failing.count, errors[0])
    if blocked:
        first = blocked[0]
        log.warning(
            "tick %s: %d blocked run(s), e.g. %s (%s)", at.isoformat(), len(blocked), first.key, blocked_why(first, at)
        )
    return report


# --------------------------------------------------------------------------- plan (read-only)


def _blocking_run(rt: Runtime, routine: Routine) -> RunRecord | None:
    """The routine's non-terminal run, if any (at most one exists)."""
    for state in (RunState.RUNNING, RunState.SUBMITTED, RunState.COLLECTING, RunState.CLAIMED):
        rows = rt.store.list_runs(routine.scope, routine_id=routine.routine_id, state=state, limit=1)
        if rows:
            return rows[0]
    return None


Planned = tuple[PlannedFire | None, PlannedRoutine | None, tuple[datetime | None, ...]]


def _plan_one(rt: Runtime, planner: Plan, routine: Routine) -> Planned:
    """What the tick would do with one due routine, and the instants it would leave for the
    wake-up hint (the routine's next fire; a claimed fire's re-send and expiry)."""
    decision = planner(routine)
    fire, skip = _plan_fire(rt, routine, decision)
    if not isinstance(decision, Fire):
        return fire, skip, ()
    if fire is not None and fire.action == "claim":
        return fire, skip, (decision.next_due_at, decision.expires_at, decision.resend_at)
    return fire, skip, (decision.next_due_at,)


def _plan_fire(rt: Runtime, routine: Routine, decision: Decision) -> tuple[PlannedFire | None, PlannedRoutine | None]:
    k = routine.key
    if isinstance(decision, NotDue):
        nxt = decision.next_due_at.isoformat() if decision.next_due_at else "never"
        return None, PlannedRoutine(k.org, k.uid, k.routine_id, f"not due (stale index): next fire {nxt}")
    if not isinstance(decision, Fire):
        why = f"deferred until {decision.until.isoformat()}: {decision.error}"
        return None, PlannedRoutine(k.org, k.uid, k.routine_id, why)
    fire = decision

    def planned(action: str, why: str) -> PlannedFire:
        due = fire.due_at or fire.fire_at
        return PlannedFire(k.org, k.uid, k.routine_id, fire.run_id, fire.fire_at, action, why, due, fire.fires_missed)

    if fire.missed:
        why = f"missed: fire {fire.run_id} is past its window (closed {fire.expires_at.isoformat()})"
        return planned("skip:missed", why), PlannedRoutine(k.org, k.uid, k.routine_id, why)
    blocking = _blocking_run(rt, routine)
    if blocking is None:
        return planned("claim", f"due; eligible until {fire.expires_at.isoformat()}"), None
    if supersession.supersedable(blocking.state, blocking.origin):
        return planned("claim", f"due; supersedes claimed {blocking.run_id} (skipped: missed)"), None
    why = f"overlap with run {blocking.run_id} ({blocking.state})"
    if fire.buffer:  # overlap latest: it waits, replacing an older buffered fire
        return planned("buffer", f"{why}: waits buffered until it ends"), None
    return planned("skip:overlap", why), PlannedRoutine(k.org, k.uid, k.routine_id, why)


def plan(rt: Runtime, now: datetime | None = None) -> TickPlan:
    """What a tick at ``now`` would claim, re-send, expire, poll and skip, and why. Writes nothing."""
    at = rt.peek_now(now)
    s = rt.settings
    planner = make_plan(rt, at)
    due: list[PlannedFire] = []
    skipped: list[PlannedRoutine] = []
    tick_calendars(rt.store, at)  # the business calendars, as the tick installs them
    wakes: list[datetime | None] = [rt.store.peek_wake(at)]
    for routine in rt.store.peek_due(at, s.claim_limit):
        fire, skip, woken = _plan_one(rt, planner, routine)
        if fire is not None:
            due.append(fire)
        if skip is not None:
            skipped.append(skip)
        wakes.extend(woken)
    resends = rt.store.peek_resends(at, s.claim_limit)
    polls = tuple(
        {
            "org": r.org,
            "uid": r.uid,
            "routine_id": r.routine_id,
            "run_id": r.run_id,
            "collect_run_id": r.run_id,
        }
        for r in rt.store.peek_polls(at, s.claim_limit)
    )
    inactive = tuple(
        PlannedRoutine(r.org, r.uid, r.routine_id, _inactive_why(r)) for r in rt.store.list_inactive(s.claim_limit)
    )
    failing = rt.store.erroring(ERRORING_LIMIT)
    blocked = rt.store.blocked(at, s.run_time_limit)
    return TickPlan(
        at=at,
        due=tuple(due),
        resends=tuple(r.key for r in resends.resend),
        expiring=tuple(r.key for r in resends.expired),
        polls=polls,
        skipped=tuple(skipped),
        inactive=inactive,
        blocked=tuple(r.key for r in blocked),
        blocked_why=tuple(blocked_why(r, at) for r in blocked),
        errors=tuple(_erroring(failing.routines)),
        erroring_count=failing.count,
        next_wake_at=min((w for w in wakes if w is not None and w > at), default=None),
    )


def _inactive_why(routine: Routine) -> str:
    if not routine.enabled:
        return "disabled"
    return f"paused: {routine.paused_reason}"
